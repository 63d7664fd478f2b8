"""Following calls out of a region: same-file functions, ``self`` methods, submodules whose class
is known, and functions imported from other files of the project.

Each function is analysed once (its :class:`~cgkit.check.facts.Facts` are cached); a region walk is a
breadth-first search over call sites, so every reached function is reported with the shortest
chain of calls from the region.
"""

from __future__ import annotations

import ast

from cgkit.check.facts import argument_kinds, attr_kind, facts_of, held_by_self
from cgkit.check.project import ClassIndex, FuncRef
from cgkit.check.regions import (
    LIBRARY_METHOD_NAMES,
    kind_targets,
    methods_of_file,
    modules_of_file,
    resolve_callable,
)

MAX_DEPTH = 12
CANDIDATE_DEPTH = 3  # candidates (no capture in view, info only): their own code and a few calls down


def resolve_call(facts, call) -> list[FuncRef]:
    """The project functions a call site may run (empty for library calls and unknown callees)."""
    node = call.node
    func = node.func
    project = facts.project
    t = type(func)
    if t is ast.Name:
        name = func.id
        if name in facts.local_defs:
            return [project.local_def(facts, name)]
        kind = facts.kind_of_name(name)
        if kind is not None:
            return kind_targets(kind, facts, project)
        if name in facts.params and not any(s.name == name for s in facts.stores):
            return _modules_of_file(facts)  # ``model(x)`` of an untyped parameter
        if held_by_self(func, facts) and facts.kind_of_name(name) is None:  # ``for cb in self.hooks: cb(x)``
            return _callable_objects_of_file(facts)
        if name in facts.params or any(s.name == name for s in facts.stores):
            return []
        module = facts.module
        if name in module.defs and not (facts.local_imports and name in facts.local_imports):
            return [FuncRef(module, module.defs[name], None, name)]
        if name in module.classes:
            return _constructor(module.classes[name], project)
        if call.qual is not None:
            target = project.lookup(call.qual)
            if isinstance(target, FuncRef):
                return [target]
            if isinstance(target, ClassIndex):
                return _constructor(target, project)
        return []
    if t is ast.Attribute:
        value = func.value
        attr = func.attr
        if type(value) is ast.Name and value.id == facts.self_name and facts.cls is not None:
            method = facts.cls.find_method(attr, project)
            if method is not None:  # and the overrides of the subclasses ``self`` may be an instance of
                return [method, *project.overrides(facts.cls, attr)]
            kind = attr_kind(facts.cls, attr, project)
            return kind_targets(kind, facts, project) if kind is not None else _modules_of_file(facts)
        if type(value) is ast.Call and type(value.func) is ast.Name and value.func.id == "super" and facts.cls is not None:
            for base in facts.cls.bases(project):
                if isinstance(base, ClassIndex):
                    method = base.find_method(attr, project)
                    if method is not None:
                        return [method]
            return []
        owner = call.recv if call.qual is None else None
        if owner is None and call.qual is None:
            owner = facts.infer(value)
        if type(owner) is tuple:
            if owner[0] == "inst":
                if attr in ("cuda", "to", "train", "eval", "half", "float", "zero_grad", "parameters"):
                    return []
                method = owner[1].find_method(attr, project)
                return [method] if method is not None else []
            return []
        if call.qual is not None:
            target = project.lookup(call.qual)
            if isinstance(target, FuncRef):
                return [target]
            return []
        return _only_method_named(facts, attr) if owner is None and held_by_self(value, facts) else []
    if t is ast.Call or t is ast.Subscript:
        return kind_targets(facts.infer(func), facts, project)
    return []


def _modules_of_file(facts) -> list[FuncRef]:
    """An object of unknown type called (``self.model(x)`` with ``model`` an untyped parameter of
    ``__init__``): the forwards of the modules this file defines, other than the caller's own class."""
    return modules_of_file(facts.module, facts.project, other_than=facts.cls)


def _callable_objects_of_file(facts) -> list[FuncRef]:
    """An object of unknown type called: the ``__call__`` of the file's class that defines it (one, or one
    hierarchy's); with no such class, the file's modules."""
    if not any(cls is not facts.cls and "__call__" in cls.methods for cls in facts.module.classes.values()):
        return _modules_of_file(facts)  # ``for layer in self.layers: x = layer(x)``
    return methods_of_file(facts.module, "__call__", facts.project, other_than=facts.cls)


def _only_method_named(facts, attr: str) -> list[FuncRef]:
    """``obj.meth(...)`` on an object of unknown type: the file's class that defines ``meth`` (one, or one
    hierarchy's), when the name is not a common library method's."""
    if attr.startswith("__") or attr in LIBRARY_METHOD_NAMES:
        return []
    return methods_of_file(facts.module, attr, facts.project, other_than=facts.cls)


def _constructor(cls: ClassIndex, project) -> list[FuncRef]:
    """An object built inside a region runs its ``__init__`` there (allocations, host code)."""
    init = cls.find_method("__init__", project)
    return [init] if init is not None else []


def walk(region, project, scan, emit) -> list:
    """Visit every function the region reaches; ``scan(facts)`` lists a function's hazards (computed once
    per function), and ``emit(hazard, facts, chain)`` is called for each one inside the region.

    Returns every function the walk reached, with the lines of it that run in the region and the
    calls that lead there (the region's own code first): ``[(facts, (lo, hi), chain), ...]``.
    """
    reached = []
    seen: set[int] = set()
    queue: list[tuple[FuncRef, tuple[int, int] | None, list[dict], bool]] = []
    if region.span is not None and region.scope is not None:
        queue.append((region.scope, region.span, [], True))
    for root in region.roots:
        queue.append((root, None, [_step(root, None)], True))
    for passed in region.passed:  # callables handed to a capture helper by its callers
        caller_step = {**_step(passed.caller, None), "line": passed.call.lineno}
        chain = [caller_step, _step(passed.target, passed.call.lineno)]
        queue.append((passed.target, None, chain, False))
    head = 0
    while head < len(queue):
        fref, span, chain, is_root = queue[head]
        head += 1
        key = (fref.key, span)
        if key in seen:
            continue
        seen.add(key)
        if span is None:
            seen.add((fref.key, None))
        facts = facts_of(project, fref)
        lo, hi = span if span is not None else (0, 1 << 30)
        reached.append((facts, (lo, hi), chain))
        for hazard in facts.hazards(scan):
            line = getattr(hazard.node, "lineno", 0)
            if lo <= line <= hi and (is_root or not hazard.root_only):
                emit(hazard, facts, chain)
        if len(chain) >= (CANDIDATE_DEPTH if region.klass == "candidate" else MAX_DEPTH):
            continue
        for call in facts.calls:
            line = call.node.lineno
            if not (lo <= line <= hi):
                continue
            for target in resolve_call(facts, call):
                if (target.key, None) in seen:
                    continue
                project.seed(target, argument_kinds(facts, call.node, target))
                queue.append((target, None, [*chain, _step(target, line)], False))
    return reached


def _step(fref: FuncRef, call_line: int | None) -> dict:
    return {"name": fref.display, "line": fref.line, "path": fref.module.path, "call_line": call_line}


__all__ = ["argument_kinds", "resolve_call", "resolve_callable", "walk"]
