"""Callables handed to a capture: the body of a function passed to a capture helper is captured too.

A helper that receives a callable and calls it inside a region (``def capture(fn): ... with
torch.cuda.graph(g): out = fn()``), or an object that stores a callable from its constructor and
calls it inside a region (``self.runnable = runnable`` ... ``self.runnable(*args)``), captures
whatever its callers pass. For each such region this module finds the slots (the parameter, or the
constructor parameter behind the attribute), the call sites that fill them in the checked files,
and what they pass (a function, a nested ``def``, a module's ``forward``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from cgkit.check.calls import argument_kinds
from cgkit.check.facts import facts_of
from cgkit.check.names import dotted
from cgkit.check.project import FUNC_TYPES, FuncRef
from cgkit.check.regions import resolve_callable

MAX_CALL_SITES = 50


@dataclass
class Passed:
    """A callable passed to a region's helper at one call site."""

    target: FuncRef  # what is passed (and so captured)
    caller: FuncRef  # the function making the call
    call: ast.Call  # the call of the helper (or of the class constructor)
    helper: str  # the helper's display name
    slot: str  # the parameter that receives it
    warmed_up: bool  # the caller or the helper calls it before the capture


def passed_callables(region, project) -> list[Passed]:
    """What the callers of a region's helper pass into the slots the region calls."""
    if region.span is None or region.scope is None or type(region.scope.node) is ast.Module:
        return []
    scope = region.scope
    facts = facts_of(project, scope)
    lo, hi = region.span
    param_slots, attr_slots = _slots(facts, lo, hi)
    out: list[Passed] = []
    if param_slots:
        params = scope.positional_params
        helper_warms = {p for p in param_slots if _called_before(facts, p, region.stmt.lineno, param_slots)}
        for caller, call in _call_sites(project, scope.name, scope):
            for slot in param_slots:
                arg = _argument(call, params, slot)
                if arg is not None:
                    out.extend(_resolve(project, caller, call, arg, scope.display, slot, slot in helper_warms))
    if attr_slots and scope.cls is not None:
        init = scope.cls.methods.get("__init__")
        if init is not None:
            init_ref = FuncRef(scope.cls.module, init, scope.cls, "__init__")
            init_facts = facts_of(project, init_ref)
            for attr in attr_slots:
                param = _init_param_for(init_facts, attr)
                if param is None:
                    continue
                for caller, call in _call_sites(project, scope.cls.name, None):
                    arg = _argument(call, init_ref.positional_params, param)
                    if arg is not None:
                        out.extend(_resolve(project, caller, call, arg, f"{scope.cls.name}()", param, False))
    return out


def seed_from_callers(region, project) -> None:
    """A capture inside a function: its parameters take the kinds its callers pass (``Runner(model)``
    makes ``model`` a module inside ``Runner.__init__``'s capture). The first call site that gives a
    kind wins; nothing is assumed where no caller is in view."""
    scope = region.scope
    if region.span is None or scope is None or type(scope.node) is ast.Module or scope.key in project.facts_cache:
        return
    if scope.name == "__init__" and scope.cls is not None:
        name, params = scope.cls.name, scope.positional_params
    else:
        name, params = scope.name, scope.positional_params
    for caller, call in _call_sites(project, name, scope):
        kinds = argument_kinds(facts_of(project, caller), call, scope)
        if kinds:
            project.seed(scope, {k: v for k, v in kinds.items() if k in params})


def _slots(facts, lo: int, hi: int) -> tuple[set[str], set[str]]:
    """Parameters (or names bound from them) and ``self`` attributes called inside the span."""
    params = set(facts.params)
    aliases: dict[str, str] = {}
    for s in facts.stores:
        value = getattr(s.node, "value", None)
        if value is not None and s.node.lineno < hi and type(s.node) is ast.Assign:
            for sub in ast.walk(value):
                if type(sub) is ast.Name and sub.id in params:
                    aliases[s.name] = sub.id
                    break
    param_slots, attr_slots = set(), set()
    for c in facts.calls:
        if not (lo <= c.node.lineno <= hi):
            continue
        func = c.node.func
        if type(func) is ast.Name:
            if func.id in params:
                param_slots.add(func.id)
            elif func.id in aliases:
                param_slots.add(aliases[func.id])
        elif type(func) is ast.Attribute and type(func.value) is ast.Name and func.value.id == facts.self_name:
            if facts.cls is not None and func.attr not in facts.cls.methods:
                attr_slots.add(func.attr)
    return param_slots, attr_slots


def _called_before(facts, param: str, line: int, slots) -> bool:
    """The helper itself runs the callable before capturing it (a warm-up inside the helper)."""
    return any(type(c.node.func) is ast.Name and c.node.func.id == param and c.node.lineno < line for c in facts.calls)


def _init_param_for(init_facts, attr: str) -> str | None:
    """``self.runnable = runnable`` in ``__init__``: the parameter behind the attribute."""
    for store in init_facts.self_stores:
        if store.attr == attr and type(store.value) is ast.Name and store.value.id in init_facts.params:
            return store.value.id
    return None


def _call_sites(project, name: str, helper: FuncRef | None):
    """Calls of ``name(...)`` or ``<x>.name(...)`` in the checked files (a bounded number)."""
    found = 0
    needle = f"{name}("
    for module in project.checked:
        if needle not in module.text:
            continue
        for fref in _functions(module):
            if helper is not None and fref.node is helper.node:
                continue
            text = "\n".join(module.lines[fref.node.lineno - 1 : fref.node.end_lineno]) if type(fref.node) is not ast.Module else module.text
            if needle not in text:
                continue
            for c in facts_of(project, fref).calls:
                parts = dotted(c.node.func)
                if parts and parts[-1] == name:
                    yield fref, c.node
                    found += 1
                    if found >= MAX_CALL_SITES:
                        return


def _functions(module):
    yield module.body_ref
    for name, node in module.defs.items():
        yield FuncRef(module, node, None, name)
        yield from _nested(module, node, None)
    for cls in module.classes.values():
        for name, node in cls.methods.items():
            yield FuncRef(module, node, cls, name)


def _nested(module, node, cls):
    for stmt in ast.walk(node):
        if stmt is not node and type(stmt) in FUNC_TYPES:
            yield FuncRef(module, stmt, cls, stmt.name)


def _argument(call: ast.Call, params: list[str], slot: str):
    for kw in call.keywords:
        if kw.arg == slot:
            return kw.value
    if slot in params:
        index = params.index(slot)
        args = call.args
        if index < len(args) and not any(type(a) is ast.Starred for a in args[: index + 1]):
            return args[index]
    return None


def _resolve(project, caller: FuncRef, call, arg, helper: str, slot: str, helper_warms: bool) -> list[Passed]:
    facts = facts_of(project, caller)
    targets = resolve_callable(facts, arg, call.lineno, project)
    out = []
    for target in targets:
        warmed = helper_warms or _caller_warms(facts, arg, call.lineno)
        out.append(Passed(target, caller, call, helper, slot, warmed))
    return out


def _caller_warms(facts, arg, line: int) -> bool:
    """The caller runs the callable before handing it to the capture (``for _ in range(2): run_once()``)."""
    parts = dotted(arg)
    if not parts:
        return False
    text = ".".join(parts)
    for c in facts.calls:
        called = dotted(c.node.func)
        if called and ".".join(called) == text and c.node.lineno < line:
            return True
    return False
