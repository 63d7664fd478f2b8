"""The rule registry: one module per family, each with ``RULES`` (data) and matchers.

A family module provides:

* ``RULES``: a list of :class:`cgkit.check.model.Rule`;
* ``scan(facts)``: yields :class:`Hazard` for one function body (called once per reached function);
* optionally ``scan_region(region, ctx)``: yields :class:`RegionHazard` for hazards that need the
  code around a region (what happens before and after a capture, not inside it).
"""

from __future__ import annotations

from typing import NamedTuple

from cgkit.check.rules import dynamic, memory, replay, runtime, setup, streams, sync, tool

FAMILIES = (sync, dynamic, memory, replay, setup, streams, runtime, tool)


class Hazard(NamedTuple):
    code: str
    node: object  # the ast node the finding points at
    args: dict
    root_only: bool = False  # only when the function itself is the region (not a callee)
    stmt: object = None  # the statement holding the node (its first line also takes a noqa)


class RegionHazard(NamedTuple):
    code: str
    module: object  # ModuleIndex the node belongs to
    node: object
    args: dict


def _collect():
    rules = {}
    for family in FAMILIES:
        for rule in family.RULES:
            if rule.code in rules:
                raise RuntimeError(f"duplicate rule code {rule.code}")
            rules[rule.code] = rule
    return dict(sorted(rules.items()))


RULES = _collect()
RULES_BY_NAME = {rule.name: rule for rule in RULES.values()}


def function_hazards(facts) -> list[Hazard]:
    out: list[Hazard] = []
    for family in FAMILIES:
        scan = getattr(family, "scan", None)
        if scan is not None:
            out.extend(scan(facts))
    return out


def region_hazards(region, ctx) -> list[RegionHazard]:
    out: list[RegionHazard] = []
    for family in FAMILIES:
        scan = getattr(family, "scan_region", None)
        if scan is not None:
            out.extend(scan(region, ctx))
    return out
