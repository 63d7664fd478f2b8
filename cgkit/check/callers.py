"""Who calls a function: the call sites of a name in the checked files, and the argument kinds they pass.

Parameters are not assumed to be anything; where the code that captures (or the code that calls a
compiled function) receives its model, tensors or callables as parameters, their kinds come from the
callers in view: ``Runner(model)`` makes ``model`` a module inside ``Runner.__init__``.
"""

from __future__ import annotations

import ast

from cgkit.check.facts import argument_kinds, facts_of, merge_argument_kinds
from cgkit.check.names import dotted
from cgkit.check.project import FUNC_TYPES, FuncRef, Project

MAX_CALL_SITES = 50


def call_sites(project: Project, name: str, skip: FuncRef | None = None):
    """Calls of ``name(...)`` or ``<x>.name(...)`` in the checked files: (calling function, call node),
    at most ``MAX_CALL_SITES`` of them. Found once per name and run (many rules ask the same question)."""
    sites = project.call_site_cache.get(name)
    if sites is None:
        sites = project.call_site_cache[name] = _find_call_sites(project, name)
    found = 0
    for fref, node in sites:
        if skip is not None and fref.node is skip.node:
            continue
        yield fref, node
        found += 1
        if found >= MAX_CALL_SITES:
            return


def _find_call_sites(project: Project, name: str) -> list:
    out = []
    needle = f"{name}("
    for module in project.checked:
        if needle not in module.text:
            continue
        for fref in functions_of(module):
            if needle not in source_of(fref):
                continue
            for c in facts_of(project, fref).calls:
                parts = dotted(c.node.func)
                if (parts and parts[-1] == name) or _on_object_made_here(module, c.node.func, name, project):
                    out.append((fref, c.node))
                    if len(out) > 2 * MAX_CALL_SITES:  # enough to leave MAX_CALL_SITES once a ``skip`` is taken out
                        return out
    return out


def _on_object_made_here(module, func, name: str, project: Project) -> bool:
    """``Builder(trunk).build(x)``: a method of the file's class called on an object built in place."""
    if type(func) is not ast.Attribute or func.attr != name or type(func.value) is not ast.Call:
        return False
    made = func.value.func
    cls = module.classes.get(made.id) if type(made) is ast.Name else None
    return cls is not None and cls.find_method(name, project) is not None


def calls_of(project: Project, helper: FuncRef):
    """The calls of a function: by its name (a constructor by its class's: ``GraphedStep(train_step, x)``), and
    through a local ``functools.partial`` of it (``bench = partial(capture, warmup=3)`` ... ``bench(case)``,
    given as the call it makes)."""
    constructor = helper.name == "__init__" and helper.cls is not None
    name = helper.cls.name if constructor else helper.name
    yield from call_sites(project, name, None if constructor else helper)
    for module in project.checked:
        if "partial(" not in module.text or name not in module.text:
            continue
        for fref in functions_of(module):
            text = source_of(fref)
            if "partial(" not in text or name not in text or fref.node is helper.node:
                continue
            facts = facts_of(project, fref)
            for store in facts.stores:
                made = getattr(store.node, "value", None)
                if type(store.node) is not ast.Assign or type(made) is not ast.Call or not made.args \
                        or facts.qual(made.func) != "functools.partial" \
                        or type(made.args[0]) is not ast.Name or made.args[0].id != name:
                    continue
                for c in facts.calls:
                    node = c.node
                    if type(node.func) is ast.Name and node.func.id == store.name and node.lineno > store.node.lineno:
                        whole = ast.Call(func=node.func, args=[*made.args[1:], *node.args],
                                         keywords=[*made.keywords, *node.keywords])
                        yield fref, ast.copy_location(whole, node)


def source_of(fref) -> str:
    """The text of a function (or of the whole module, for its top level)."""
    node, module = fref.node, fref.module
    if type(node) is ast.Module:
        return module.text
    return "\n".join(module.lines[node.lineno - 1 : node.end_lineno])


def functions_of(module):
    """A module's code: its top level, functions (and the functions nested in them), methods."""
    yield module.body_ref
    for name, node in module.defs.items():
        yield FuncRef(module, node, None, name)
        for inner in ast.walk(node):
            if inner is not node and type(inner) in FUNC_TYPES:
                yield FuncRef(module, inner, None, inner.name)
    for cls in module.classes.values():
        for name, node in cls.methods.items():
            yield FuncRef(module, node, cls, name)


def seed_from_callers(fref: FuncRef, project: Project, called_as: str | None = None) -> None:
    """Give ``fref``'s parameters the kinds its callers pass, before its facts are computed (the first
    call site that gives a parameter a kind wins, but a GPU tensor wins over a CPU one; nothing is assumed
    with no caller in view).
    ``called_as``: the name callers use instead of the function's own (``self.step_fn = torch.compile(
    self._step)`` is called as ``step_fn``)."""
    node = fref.node
    if type(node) is ast.Module:
        return
    if fref.key in project.facts_cache and not project.facts_cache[fref.key].scanned:
        return  # being walked: its parameters are read already
    name = called_as or (fref.cls.name if fref.name == "__init__" and fref.cls is not None else fref.name)
    params = set(fref.positional_params) | {a.arg for a in node.args.kwonlyargs}
    found: dict = {}
    for caller, call in call_sites(project, name, fref):
        kinds = argument_kinds(facts_of(project, caller), call, fref)
        merge_argument_kinds(found, {p: k for p, k in (kinds or {}).items() if p in params})
    cached = project.facts_cache.get(fref.key)  # (asking the callers may have analysed it)
    if cached is not None:
        # analysed before its callers were asked: analyse it again when they tell what an untyped
        # parameter holds
        if not cached.scanned or not any(cached.kind_of_name(param) is None for param in found):
            return
        del project.facts_cache[fref.key]
    project.seed(fref, found)


def argument_for(call: ast.Call, params: list[str], name: str):
    """The expression a call passes for the parameter ``name`` (keyword or position), or None."""
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    if name in params:
        index = params.index(name)
        if index < len(call.args) and not any(type(a) is ast.Starred for a in call.args[: index + 1]):
            return call.args[index]
    return None
