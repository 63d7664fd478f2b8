"""Who calls a function: the call sites of a name in the checked files, and the argument kinds they pass.

Parameters are not assumed to be anything; where the code that captures (or the code that calls a
compiled function) receives its model, tensors or callables as parameters, their kinds come from the
callers in view: ``Runner(model)`` makes ``model`` a module inside ``Runner.__init__``.
"""

from __future__ import annotations

import ast

from cgkit.check.facts import argument_kinds, facts_of
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
                if parts and parts[-1] == name:
                    out.append((fref, c.node))
                    if len(out) > 2 * MAX_CALL_SITES:  # enough to leave MAX_CALL_SITES once a ``skip`` is taken out
                        return out
    return out


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
    call site that gives a parameter a kind wins; nothing is assumed with no caller in view).
    ``called_as``: the name callers use instead of the function's own (``self.step_fn = torch.compile(
    self._step)`` is called as ``step_fn``)."""
    node = fref.node
    if type(node) is ast.Module or fref.key in project.facts_cache:
        return
    name = called_as or (fref.cls.name if fref.name == "__init__" and fref.cls is not None else fref.name)
    params = set(fref.positional_params) | {a.arg for a in node.args.kwonlyargs}
    for caller, call in call_sites(project, name, fref):
        kinds = argument_kinds(facts_of(project, caller), call, fref)
        if kinds:
            project.seed(fref, {k: v for k, v in kinds.items() if k in params})


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
