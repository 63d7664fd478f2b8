"""The rule registry and the dispatcher: one family module per code range, each rule one unit.

A family module holds ``RULES``, a :class:`~cgkit.check.rules._base.Family` of records with their
matchers (see ``_base``). :class:`Dispatch` builds the tables once for the selected rules (by method
name, qualified name, facts list; function level and region level), so a function's calls are walked
once whatever the number of rules, and matchers of rules that are not selected never run.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from functools import cache

from cgkit.check.model import Hazard, RegionHazard, Rule
from cgkit.check.rules import dynamic, memory, replay, runtime, setup, streams, sync, tool
from cgkit.check.rules._base import Body, Calls, Each, Region

FAMILIES = (sync, dynamic, memory, replay, setup, streams, runtime, tool)


def _collect() -> dict[str, Rule]:
    rules = {}
    for family in FAMILIES:
        for rule in family.RULES:
            if rule.code in rules:
                raise RuntimeError(f"duplicate rule code {rule.code}")
            rules[rule.code] = rule
    return dict(sorted(rules.items()))


RULES = _collect()
RULES_BY_NAME = {rule.name: rule for rule in RULES.values()}


class Dispatch:
    """Which matcher runs on what, for a set of rules."""

    def __init__(self, rules: list[Rule]):
        # Each table holds (code, matcher) pairs.
        self.methods: dict[str, list] = defaultdict(list)
        self.any_methods: dict[str, list] = defaultdict(list)
        self.quals: dict[str, list] = defaultdict(list)
        self.qualified: list = []
        self.every_call: list = []
        self.each: dict[str, list] = defaultdict(list)
        self.body: list = []
        self.region: list = []
        for rule in rules:
            for on, matcher in rule.matchers:
                entry = (rule.code, matcher)
                if isinstance(on, Calls):
                    for m in on.methods:
                        self.methods[m].append(entry)
                    for m in on.any_methods:
                        self.any_methods[m].append(entry)
                    for q in on.quals:
                        self.quals[q].append(entry)
                    if on.qualified:
                        self.qualified.append(entry)
                    if on.every:
                        self.every_call.append(entry)
                elif isinstance(on, Each):
                    self.each[on.facts].append(entry)
                elif isinstance(on, Body):
                    self.body.append(entry)
                elif isinstance(on, Region):
                    self.region.append(entry)
                else:
                    raise TypeError(f"{rule.code}: unknown trigger {on!r}")
        self.yields = any(rule.yields_to for rule in rules)

    def function_hazards(self, f) -> list[Hazard]:
        """Everything the function-level matchers find in one function (its facts)."""
        out: list[Hazard] = []
        methods, any_methods, quals = self.methods, self.any_methods, self.quals
        for c in f.calls:
            q, m = c.qual, c.meth
            if q is not None:
                listeners = quals.get(q, ())
                if self.qualified:
                    listeners = [*listeners, *self.qualified]
            else:
                listeners = methods.get(m, ()) if m is not None else ()
            if m is not None and m in any_methods:
                listeners = [*listeners, *any_methods[m]]
            if self.every_call:
                listeners = [*listeners, *self.every_call]
            for code, matcher in listeners:
                out.extend(_hazards(code, matcher(c, f)))
        for attr, entries in self.each.items():
            for item in getattr(f, attr):
                for code, matcher in entries:
                    out.extend(_hazards(code, matcher(item, f)))
        for code, matcher in self.body:
            out.extend(_hazards(code, matcher(f)))
        return _precedence(out) if self.yields else out

    def region_hazards(self, region, ctx) -> list[RegionHazard]:
        """Everything the region-level matchers find around one capture region."""
        out = []
        for code, matcher in self.region:
            for fd in matcher(region, ctx):
                out.append(RegionHazard(code, fd.module or region.module, fd.node, fd.args or {}, fd.chain))
        return out


def _hazards(code: str, found) -> list[Hazard]:
    return [Hazard(code, fd.node, fd.args or {}, fd.on_input, fd.stmt) for fd in found
            if not _on_error_path(fd.node, fd.stmt)]


def _on_error_path(node, stmt) -> bool:
    """Code that runs only when the step is failing anyway: a ``raise`` statement, or the message
    of an ``assert`` (evaluated only when the assertion fails). A sync there never happens on a
    good step, so it is not a capture hazard."""
    t = type(stmt)
    if t is ast.Raise:
        return True
    if t is ast.Assert and stmt.msg is not None:
        msg = stmt.msg
        start = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        return (msg.lineno, msg.col_offset) <= start <= (msg.end_lineno, msg.end_col_offset)
    return False


def _precedence(hazards: list[Hazard]) -> list[Hazard]:
    """Drop a hazard when a rule it yields to reported the same node."""
    codes_at: dict[int, set[str]] = defaultdict(set)
    for h in hazards:
        codes_at[id(h.node)].add(h.code)
    return [h for h in hazards if not (codes_at[id(h.node)] & set(RULES[h.code].yields_to))]


@cache
def dispatch(codes: frozenset[str] | None = None) -> Dispatch:
    """The dispatch tables for the rules with these codes (all when None), built once per selection."""
    return Dispatch([rule for code, rule in RULES.items() if codes is None or code in codes])
