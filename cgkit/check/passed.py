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

from cgkit.check.callers import argument_for, call_sites, calls_of, functions_of, source_of
from cgkit.check.facts import facts_of
from cgkit.check.names import bound_values, dotted
from cgkit.check.project import FuncRef
from cgkit.check.regions import decorated_by, enclosing_functions, resolve_callable


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
        for caller, call in calls_of(project, scope):
            for slot in param_slots:
                arg = argument_for(call, params, slot)
                if arg is not None:
                    found = _resolve(project, caller, call, arg, scope.display, slot, slot in helper_warms)
                    for item in found:
                        project.seed(item.target, _passed_argument_kinds(project, facts, lo, hi, slot, params, caller, call,
                                                                         item.target))
                    if not found:  # ``def bench(fn): return capture(fn)``: what bench's callers pass
                        for outer, outer_call, outer_arg in _forwarded(project, caller, arg):
                            found.extend(_resolve(project, outer, outer_call, outer_arg, scope.display, slot,
                                                  slot in helper_warms))
                    out.extend(found)
    out.extend(_decorated(region, project, facts, lo, hi))
    if attr_slots and scope.cls is not None:
        init = scope.cls.methods.get("__init__")
        if init is not None:
            init_ref = FuncRef(scope.cls.module, init, scope.cls, "__init__")
            init_facts = facts_of(project, init_ref)
            for attr in attr_slots:
                param = _init_param_for(init_facts, attr)
                if param is None:
                    continue
                warms = _attr_called_before(facts, attr, region.stmt.lineno)
                for caller, call in call_sites(project, scope.cls.name, None):
                    arg = argument_for(call, init_ref.positional_params, param)
                    if arg is not None:
                        out.extend(_resolve(project, caller, call, arg, f"{scope.cls.name}()", param, warms))
    return out


def _forwarded(project, helper: FuncRef, arg, depth: int = 0) -> list:
    """(caller, call, argument) for each call of ``helper`` when ``arg`` is one of its parameters that it
    passes on to the capturing helper; followed up to three helpers deep."""
    if depth > 2 or type(arg) is not ast.Name or arg.id not in helper.positional_params:
        return []
    out = []
    for caller, call in call_sites(project, helper.name, helper):
        outer = argument_for(call, helper.positional_params, arg.id)
        if outer is None:
            continue
        if type(outer) is ast.Name and outer.id in caller.positional_params:
            out.extend(_forwarded(project, caller, outer, depth + 1))
        else:
            out.append((caller, call, outer))
    return out


def _decorated(region, project, facts, lo: int, hi: int) -> list[Passed]:
    """A decorator that captures the function it wraps: the region is in the wrapper, which calls a
    parameter of an enclosing function (``def deco(fn): def wrapper(*a): with torch.cuda.graph(g):
    fn(*a)``). The functions decorated with it (``@deco`` or ``@factory(...)`` where the factory
    returns ``deco``) are captured."""
    scope = region.scope
    module = scope.module
    enclosing = enclosing_functions(module, scope.node)
    if not enclosing:
        return []
    called = {c.node.func.id for c in facts.calls if lo <= c.node.lineno <= hi and type(c.node.func) is ast.Name}
    local = {s.name for s in facts.stores} | set(facts.params)
    for depth, outer in enumerate(enclosing):
        params = {a.arg for a in outer.args.args}
        slots = (called - local) & params
        if not slots:
            continue
        names = {outer.name}
        for factory in enclosing[depth + 1 :]:  # ``def cuda_graphed(...): def deco(fn): ...; return deco``
            if any(type(n) is ast.Return and type(n.value) is ast.Name and n.value.id in names for n in ast.walk(factory)):
                names.add(factory.name)
        slot = sorted(slots)[0]
        # The wrapper warms up when it calls the function before capturing it (or on a side stream).
        warmed = _called_before(facts, slot, region.stmt.lineno, slots) or any(
            w.lineno < region.stmt.lineno for w, _ in facts.stream_withs)
        out = [Passed(fref, module.body_ref, dec, f"@{dotted(dec.func if type(dec) is ast.Call else dec)[-1]}", slot, warmed)
               for fref, dec in decorated_by(module, names)]
        for fref in functions_of(module):
            out.extend(_applied(project, fref, outer.name, names - {outer.name}, slot, warmed))
        return out
    return []


def _applied(project, fref, deco: str, factories: set, slot: str, warmed: bool) -> list[Passed]:
    """A capturing decorator applied by a call: ``deco(self._predict)``, or ``cuda_graphed()(self._predict)``
    where the factory ``cuda_graphed`` returns it."""
    if not any(f"{name}(" in source_of(fref) for name in (deco, *factories)):
        return []
    facts = facts_of(project, fref)
    out = []
    for c in facts.calls:
        node = c.node
        func = node.func.func if type(node.func) is ast.Call else node.func
        parts = dotted(func)
        if not parts or not node.args or parts[-1] not in (factories if func is not node.func else {deco}):
            continue
        for target in resolve_callable(facts, node.args[0], node.lineno, project):
            out.append(Passed(target, fref, node, f"@{parts[-1]}", slot, warmed))
    return out



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


def _attr_called_before(facts, attr: str, line: int) -> bool:
    """The capturing method runs ``self.<attr>(...)`` before the capture (its warm-up)."""
    for c in facts.calls:
        func = c.node.func
        if type(func) is ast.Attribute and func.attr == attr and type(func.value) is ast.Name \
                and func.value.id == facts.self_name and c.node.lineno < line:
            return True
    return False


def _init_param_for(init_facts, attr: str) -> str | None:
    """``self.runnable = runnable`` (or ``self.fn, self.n = fn, n``) in ``__init__``: the parameter
    behind the attribute."""
    for store in init_facts.self_stores:
        if store.attr != attr:
            continue
        value = store.value
        stmt = store.stmt
        if type(value) is ast.Tuple and type(stmt) is ast.Assign and type(stmt.targets[0]) is ast.Tuple:
            targets = stmt.targets[0].elts
            index = next((i for i, t in enumerate(targets) if type(t) is ast.Attribute and t.attr == attr), None)
            value = value.elts[index] if index is not None and index < len(value.elts) else None
        if type(value) is ast.Name and value.id in init_facts.params:
            return value.id
    return None


def _passed_argument_kinds(project, helper_facts, lo, hi, slot, params, caller, call, target) -> dict:
    """The kinds the helper's call of the passed callable gives its parameters: ``fn(*static_args)``
    with the caller's ``(x, scale, w)``, or ``fn(x)`` with the caller's ``x``."""
    caller_facts = facts_of(project, caller)
    target_params = target.positional_params
    for c in helper_facts.calls:
        func = c.node.func
        if not (lo <= c.node.lineno <= hi) or type(func) is not ast.Name:
            continue
        if func.id != slot and not _aliases(helper_facts, func.id, slot):
            continue
        values = []
        for a in c.node.args:
            if type(a) is ast.Starred and type(a.value) is ast.Name and a.value.id in params:
                given = argument_for(call, params, a.value.id)
                if type(given) not in (ast.Tuple, ast.List):
                    return {}
                values.extend((caller_facts, e) for e in given.elts)
            elif type(a) is ast.Name and a.id in params:
                given = argument_for(call, params, a.id)
                if given is None:
                    return {}
                values.append((caller_facts, given))
            else:
                values.append((helper_facts, a))
        out = {}
        for name, (facts, expr) in zip(target_params, values, strict=False):
            kind = facts.infer(expr)
            if kind is not None:
                out[name] = kind
        return out
    return {}


def _aliases(facts, name: str, param: str) -> bool:
    for s in facts.stores:
        value = getattr(s.node, "value", None)
        if s.name == name and value is not None and any(type(n) is ast.Name and n.id == param for n in ast.walk(value)):
            return True
    return False


def _literal_choices(facts, arg) -> list:
    """``for name, fn, args in (("a", f, ...), ("b", g, ...)):`` then ``helper(fn)``: f and g."""
    if type(arg) is not ast.Name:
        return []
    out = []
    for loop in facts.loops:
        if type(loop) is ast.While:
            continue
        elts = _iterated_literal(facts, loop.iter)
        if elts is None:
            continue
        target = loop.target
        if type(target) is ast.Name and target.id == arg.id:
            out.extend(elts)
        elif type(target) is ast.Tuple:
            names = [t.id if type(t) is ast.Name else None for t in target.elts]
            if arg.id in names:
                index = names.index(arg.id)
                out.extend(e.elts[index] for e in elts if type(e) in (ast.Tuple, ast.List) and len(e.elts) > index)
    return out


def _bound_once(facts, arg) -> list:
    """``wide = functools.partial(netvlad, feats, c)`` then ``footprint(wide)``: the one value the name
    is bound to in the caller."""
    if type(arg) is not ast.Name:
        return []
    stores = [s for s in facts.stores if s.name == arg.id]
    if len(stores) != 1 or stores[0].loop_target or type(stores[0].node) is not ast.Assign:
        return []
    return [stores[0].node.value]


def _assigned_in(node, name: str) -> list:
    """What ``name = value`` binds anywhere in a function's (or a script's) own code, nested blocks
    (``if __name__ == "__main__":``, ``with``, loops) included, nested functions not."""
    out = []
    stack = list(getattr(node, "body", []))
    while stack:
        stmt = stack.pop(0)
        if type(stmt) in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            continue
        if type(stmt) is ast.Assign and any(type(t) is ast.Name and t.id == name for t in stmt.targets):
            out.append(stmt.value)
        for field in ("body", "orelse", "finalbody"):
            stack.extend(getattr(stmt, field, []) or [])
    return out


def _iterated_literal(facts, it, depth: int = 0) -> list | None:
    """The elements a loop takes from a literal: ``(("a", f), ...)`` written in place or bound to a name,
    or a dict's ``.items()`` (as key-value pairs) or ``.values()``, the dict a literal
    (``cases = {"netvlad": partial(netvlad, ...)}; for name, case in cases.items()``) or filled entry by
    entry (``cases[f"cls{res}"] = partial(...)``), here or by the callers that pass it; through
    ``sorted(...)``, ``list(...)`` and ``reversed(...)``."""
    while type(it) is ast.Call and type(it.func) is ast.Name and it.func.id in ("sorted", "list", "reversed", "tuple") \
            and it.args:
        it = it.args[0]
    method = None
    if type(it) is ast.Call and type(it.func) is ast.Attribute and it.func.attr in ("items", "values") and not it.args:
        method, it = it.func.attr, it.func.value
    pairs = None
    if type(it) is ast.Name:
        name = it.id
        bound = _assigned_in(facts.fref.node, name) or bound_values(facts.module.tree.body, name)
        it = bound[-1] if bound else None
        if method is not None:
            pairs = _entries_stored(facts, name) if _empty_dict(it) else None
            if it is None and pairs is None and depth < 1:
                return _passed_dict(facts, name, method, depth)
    if method is None:
        return list(it.elts) if type(it) in (ast.Tuple, ast.List) else None
    if pairs is None:
        if type(it) is not ast.Dict or any(k is None for k in it.keys):
            return None
        pairs = list(zip(it.keys, it.values, strict=True))
    if method == "values":
        return [v for _k, v in pairs]
    return [ast.Tuple(elts=[k, v], ctx=ast.Load()) for k, v in pairs]


def _empty_dict(value) -> bool:
    return (type(value) is ast.Dict and not value.keys) or (
        type(value) is ast.Call and type(value.func) is ast.Name and value.func.id == "dict" and not value.args
        and not value.keywords)


def _entries_stored(facts, name: str) -> list | None:
    """``(key, value)`` of each ``name[key] = value`` of the function; None when there is none."""
    pairs = [(target.slice, stmt.value) for target, stmt in facts.item_stores
             if type(target.value) is ast.Name and target.value.id == name and type(stmt) is ast.Assign]
    return pairs or None


def _passed_dict(facts, param: str, method: str, depth: int) -> list | None:
    """The entries of the dict the callers pass for ``param`` (``bench_cases(cases)``)."""
    fref = facts.fref
    if type(fref.node) is ast.Module or param not in fref.positional_params:
        return None
    out: list = []
    for caller, call in call_sites(facts.project, fref.name, fref):
        arg = argument_for(call, fref.positional_params, param)
        if arg is not None:
            call_ = ast.Call(func=ast.Attribute(value=arg, attr=method, ctx=ast.Load()), args=[], keywords=[])
            out += _iterated_literal(facts_of(facts.project, caller), call_, depth + 1) or []
    return out or None


def _resolve(project, caller: FuncRef, call, arg, helper: str, slot: str, helper_warms: bool) -> list[Passed]:
    facts = facts_of(project, caller)
    targets = resolve_callable(facts, arg, call.lineno, project)
    if not targets:
        for choice in _literal_choices(facts, arg) + _bound_once(facts, arg):
            targets.extend(resolve_callable(facts, choice, call.lineno, project))
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
