"""Following calls out of a region: same-file functions, ``self`` methods, submodules whose class
is known, and functions imported from other files of the project.

Each function is analysed once (its :class:`~cgkit.check.facts.Facts` are cached); a region walk is a
breadth-first search over call sites, so every reached function is reported with the shortest
chain of calls from the region.
"""

from __future__ import annotations

import ast
import re
from typing import NamedTuple

from cgkit.check.callers import argument_for, source_of
from cgkit.check.facts import argument_kinds, attr_kind, facts_of, held_by_self, is_self_attr
from cgkit.check.names import dotted_text
from cgkit.check.project import ClassIndex, FuncRef
from cgkit.check.regions import (
    LIBRARY_METHOD_NAMES,
    constant_strings,
    kind_targets,
    methods_of_file,
    modules_of_file,
    resolve_callable,
)

MAX_DEPTH = 12
_CAPTURING = re.compile(r"capture_begin|CUDAGraph|\.graph\(|make_graphed_callables|compile\(")
_CAPTURE_GUARD = re.compile(r"is_current_stream_capturing|is_graph_capturing")
CANDIDATE_DEPTH = 3  # candidates (no capture in view, info only): their own code and a few calls down


def resolve_call(facts, call, names: dict[str, str] | None = None) -> list[FuncRef]:
    """The project functions a call site may run (empty for library calls and unknown callees).
    ``names``: the strings this function's parameters hold on the path being followed (for ``getattr``)."""
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
        aliased = _callables_named(facts, name, call.node.lineno)
        if aliased:  # ``body = extra_body or self.body`` ... ``body()``; a callable its callers pass
            return aliased
        if name in facts.params and not any(s.name == name for s in facts.stores):
            return _modules_of_file(facts)  # ``model(x)`` of an untyped parameter
        if held_by_self(func, facts) and facts.kind_of_name(name) is None:  # ``for cb in self.hooks: cb(x)``
            return _methods_listed(facts, name, call.node.lineno) or _callable_objects_of_file(facts, call.node)
        dispatched = _getattr_stored(facts, name)
        if dispatched is not None:  # ``fn = getattr(cb, hook, None)`` ... ``fn(self)``
            return _getattr_targets(facts, dispatched, names)
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
        return _method_targets(facts, func.value, func.attr, call.recv, call.qual)
    if t is ast.Call and _is_getattr(func):  # ``getattr(cb, hook)(self, *args)``
        return _getattr_targets(facts, func, names)
    if t is ast.Subscript:
        targets = kind_targets(facts.infer(func), facts, project)
        return targets or registry_entries(facts, func.value, func.slice)
    if t is ast.Call:
        return kind_targets(facts.infer(func), facts, project)
    return []


def _methods_listed(facts, name: str, line: int) -> list[FuncRef]:
    """``for h in self.hooks: h(x)`` where the class fills ``self.hooks`` with its own methods
    (``self.hooks = [self._log_scale]``, ``self.hooks.append(self._clip)``): those methods (of the loop
    around the call: another loop may reuse the name for another list)."""
    loops = [s for s in facts.stores if s.name == name and s.loop_target
             and s.node.lineno <= line <= s.node.end_lineno][-1:]
    iterated = [_iterated_attr(getattr(s.node, "iter", None)) for s in loops]
    if facts.cls is None or not iterated or any(i is None or not is_self_attr(i, facts.self_name) for i in iterated):
        return []
    attrs = {i.attr for i in iterated}
    listed = []
    for node in ast.walk(facts.cls.node):
        if type(node) is ast.Assign and type(node.value) in (ast.List, ast.Tuple) and any(
                type(t) is ast.Attribute and t.attr in attrs and type(t.value) is ast.Name for t in node.targets):
            listed += node.value.elts
        elif type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "append" \
                and type(node.func.value) is ast.Attribute and node.func.value.attr in attrs and node.args:
            listed.append(node.args[0])
    out = []
    for item in listed:
        if type(item) is ast.Attribute and type(item.value) is ast.Name and item.value.id == facts.self_name:
            method = facts.cls.find_method(item.attr, facts.project)
            if method is not None and method not in out:
                out.append(method)
    return out


def _iterated_attr(node):
    """``self.hooks`` for ``self.hooks``, ``enumerate(self.hooks)``, ``reversed(self.hooks)``."""
    if type(node) is ast.Call and type(node.func) is ast.Name and node.func.id in ("enumerate", "reversed") and node.args:
        node = node.args[0]
    return node if type(node) is ast.Attribute else None


def registry_entries(facts, table, key=None) -> list[FuncRef]:
    """``TRANSFORMS[name](x)``: the functions a dispatch table of the file holds (the one entry when the key
    is a string written in the call, ``ACTIVATIONS["gelu"](x)``; every entry otherwise). The table is a
    module-level dict (``TRANSFORMS = {"a": fa, "b": fb}``, or filled by ``TRANSFORMS[key] = fn`` where ``fn``
    names a function, or by a registering decorator: ``@feature("a") def fa(...)`` with ``def feature(name):
    def deco(fn): FEATURES[name] = fn``), or a dict the object holds (``self.stages = {"detect": self._detect}``)."""
    module, project = facts.module, facts.project
    wanted = key.value if type(key) is ast.Constant and isinstance(key.value, str) else None
    if type(table) is ast.Attribute and type(table.value) is ast.Name and table.value.id == facts.self_name \
            and facts.cls is not None:
        out = []
        for node in ast.walk(facts.cls.node):
            if type(node) is ast.Assign and type(node.value) is ast.Dict and any(
                    type(t) is ast.Attribute and t.attr == table.attr and type(t.value) is ast.Name
                    and t.value.id == facts.self_name for t in node.targets):
                for k, value in zip(node.value.keys, node.value.values, strict=True):
                    if wanted is not None and type(k) is ast.Constant and k.value != wanted:
                        continue
                    if type(value) is ast.Attribute and type(value.value) is ast.Name and value.value.id == facts.self_name:
                        method = facts.cls.find_method(value.attr, project)
                        if method is not None and method not in out:
                            out.append(method)
        return out
    if type(table) is not ast.Name or table.id in facts.params or any(s.name == table.id for s in facts.stores):
        return []
    entries = _module_registries(module).get(table.id, {})
    if wanted is not None and wanted in entries:
        names = entries[wanted] + entries.get(None, [])
    else:
        names = [n for held in entries.values() for n in held]
    out = []
    for fname in names:
        ref = FuncRef(module, module.defs[fname], None, fname)
        if ref not in out:
            out.append(ref)
    return out


def _module_registries(module) -> dict:
    """{table: {key (None when not written as a string): [names of the file's functions it holds]}} for the
    module-level dispatch tables of a file, found once per file."""
    if module.registries is not None:
        return module.registries
    tables: dict = {}

    def hold(table: str, key, fname: str) -> None:
        if fname in module.defs:
            tables.setdefault(table, {}).setdefault(key if isinstance(key, str) else None, []).append(fname)

    for stmt in module.tree.body:  # ``TRANSFORMS = {"a": fa, ...}``
        if type(stmt) is ast.Assign and type(stmt.value) is ast.Dict:
            for target in (t for t in stmt.targets if type(t) is ast.Name):
                for k, v in zip(stmt.value.keys, stmt.value.values, strict=True):
                    if type(v) is ast.Name:
                        hold(target.id, k.value if type(k) is ast.Constant else None, v.id)
    registrars: dict = {}  # decorator factory -> tables its inner decorator fills with the function it is given
    for fname, fn in module.defs.items():
        for inner in (n for n in ast.walk(fn) if type(n) in (ast.FunctionDef, ast.AsyncFunctionDef) and n is not fn):
            params = {a.arg for a in inner.args.args}
            for stmt in inner.body:
                if type(stmt) is ast.Assign and type(stmt.value) is ast.Name and stmt.value.id in params:
                    for t in stmt.targets:
                        if type(t) is ast.Subscript and type(t.value) is ast.Name:
                            registrars.setdefault(fname, set()).add(t.value.id)
    for node in ast.walk(module.tree):  # ``OPS["relu"] = relu``
        if type(node) is ast.Assign and type(node.value) is ast.Name:
            for t in node.targets:
                if type(t) is ast.Subscript and type(t.value) is ast.Name:
                    hold(t.value.id, t.slice.value if type(t.slice) is ast.Constant else None, node.value.id)
    for fname, fn in module.defs.items():  # ``@feature("floor_ratio") def floor_ratio(...)``
        for deco in fn.decorator_list:
            called = deco.func if type(deco) is ast.Call else deco
            key = deco.args[0].value if type(deco) is ast.Call and deco.args and type(deco.args[0]) is ast.Constant else None
            for table in registrars.get(called.id, ()) if type(called) is ast.Name else ():
                hold(table, key, fname)
    module.registries = tables
    return tables


def _callables_named(facts, name: str, line: int) -> list[FuncRef]:
    """The functions a local name of no known kind holds where it is called, when one assignment above
    the call binds it (``body = extra_body or self.body``: either operand that can be resolved; what
    callers pass for a parameter is the business of :mod:`cgkit.check.passed`, per capture helper)."""
    stores = [s for s in facts.stores if s.name == name]
    if len(stores) != 1 or type(stores[0].node) is not ast.Assign or stores[0].loop_target or stores[0].node.lineno >= line:
        return []  # unbound here, or bound in several places (branches this walk does not tell apart)
    return resolve_callable(facts, stores[0].node.value, line, facts.project)


def _method_targets(facts, value, attr: str, recv, qual) -> list[FuncRef]:
    """What ``value.attr(...)`` runs."""
    project = facts.project
    if type(value) is ast.Name and value.id == facts.self_name and facts.cls is not None:
        method = facts.cls.find_method(attr, project)
        if method is not None:  # and the overrides of the subclasses ``self`` may be an instance of
            return [method, *project.overrides(facts.cls, attr)]
        implemented = project.overrides(facts.cls, attr)
        if implemented and attr_kind(facts.cls, attr, project) is None:
            return implemented  # a mixin calling ``self._infer(x)`` that the classes built on it define
        kind = attr_kind(facts.cls, attr, project)
        return kind_targets(kind, facts, project) if kind is not None else _modules_of_file(facts)
    if type(value) is ast.Call and type(value.func) is ast.Name and value.func.id == "super" and facts.cls is not None:
        for base in facts.cls.bases(project):
            if isinstance(base, ClassIndex):
                method = base.find_method(attr, project)
                if method is not None:
                    return [method]
        return []
    if attr == "apply":  # ``MyFn.apply(x, w)``: a custom autograd function runs its forward
        function = facts.module.resolve_expr(value, project, facts.local_imports) if type(value) is ast.Name else None
        if isinstance(function, ClassIndex) and function.is_autograd_function(project):
            forward = function.find_method("forward", project)
            return [forward] if forward is not None else []
    stored = facts.stored_on(value.id, attr, value.lineno) \
        if type(value) is ast.Name and value.id != facts.self_name and hasattr(value, "lineno") else None
    if stored is not None and facts.infer(stored) is not None:  # ``st.net = Net()`` above, then ``st.net(x)``
        return kind_targets(facts.infer(stored), facts, project)
    owner = recv if qual is None else None
    if owner is None and qual is None:
        owner = facts.infer(value)
    if type(owner) is tuple:
        if owner[0] == "inst":
            if attr in ("cuda", "to", "train", "eval", "half", "float", "zero_grad", "parameters"):
                return []
            method = owner[1].find_method(attr, project)
            if method is None:
                return []
            # ``Sub() if flag else Base()``: either class's method
            return [method, *project.overrides(owner[1], attr)] if owner[2:] == ("or a subclass",) else [method]
        return []
    if qual is not None:
        target = project.lookup(qual)
        if isinstance(target, FuncRef):
            return [target]
        return []
    if owner is None and held_by_self(value, facts):
        duck_typed = type(value) is ast.Name and value.id != facts.self_name  # ``cb`` of ``self.callbacks``
        return _only_method_named(facts, attr, duck_typed)
    if owner is None and _handed_in(facts, value):
        return _only_method_named(facts, attr)  # ``def run(model, ...): ... model.observe(x, y)``
    return []


def _handed_in(facts, value) -> bool:
    """``value`` is an object this function is given and does not bind: an untyped parameter, or one of
    the enclosing function's that a nested function reads (``lc`` in ``def step(): lc.loss(...)``)."""
    if type(value) is not ast.Name or value.id == facts.self_name or facts.qual(value) is not None:
        return False
    name = value.id
    if any(s.name == name for s in facts.stores):
        return False
    return name in facts.params or name not in facts.module.defs and name not in facts.module.classes


def _is_getattr(node) -> bool:
    return type(node) is ast.Call and type(node.func) is ast.Name and node.func.id == "getattr" and len(node.args) >= 2


def _getattr_stored(facts, name: str):
    """The ``getattr(...)`` call every assignment of ``name`` stores, if that is all it is bound to."""
    stores = [s for s in facts.stores if s.name == name]
    if not stores or name in facts.params:
        return None
    if all(type(s.node) is ast.Assign and _is_getattr(s.node.value) for s in stores):
        return stores[0].node.value
    return None


def _getattr_targets(facts, call: ast.Call, names: dict[str, str] | None) -> list[FuncRef]:
    """``getattr(cb, hook)``: the methods named by the strings ``hook`` can be (constants, a loop over
    constants, the string the path being followed passed for it, or else what the function's callers
    pass), looked up on ``cb``."""
    out = []
    name = call.args[1]
    bound = names.get(name.id) if names and type(name) is ast.Name else None
    for attr in [bound] if bound is not None else constant_strings(facts, name):
        out += [f for f in _method_targets(facts, call.args[0], attr, None, None) if f not in out]
    return out


def _modules_of_file(facts) -> list[FuncRef]:
    """An object of unknown type called (``self.model(x)`` with ``model`` an untyped parameter of
    ``__init__``): the forwards of the modules this file defines, other than the caller's own class."""
    return modules_of_file(facts.module, facts.project, other_than=facts.cls)


def _callable_objects_of_file(facts, node: ast.Call) -> list[FuncRef]:
    """An element of a collection the object holds, called (``for cb in self.callbacks: cb(self, i, kw)``):
    the ``__call__`` of the file's class that defines it (one, or one hierarchy's); when unrelated classes do,
    each whose ``__call__`` takes the arguments given (callbacks of several kinds in one list); with no such
    class, the file's modules."""
    if not any(cls is not facts.cls and "__call__" in cls.methods for cls in facts.module.classes.values()) or \
            (facts.cls is not None and facts.cls.is_module(facts.project)):
        return _modules_of_file(facts)  # ``for layer in self.layers: x = layer(x)``: a module's parts are modules
    found = methods_of_file(facts.module, "__call__", facts.project, other_than=facts.cls)
    if found or any(type(a) is ast.Starred for a in node.args) or node.keywords:
        return found
    return [ref for ref in methods_of_file(facts.module, "__call__", facts.project, other_than=facts.cls, duck_typed=True)
            if _takes(ref.node, len(node.args))]


def _takes(fn, count: int) -> bool:
    """``fn`` (a method) accepts ``count`` positional arguments after ``self``."""
    args = fn.args
    positional = len(args.posonlyargs) + len(args.args) - 1
    required = positional - len(args.defaults)
    return required <= count <= positional or (args.vararg is not None and count >= required)


def _only_method_named(facts, attr: str, duck_typed: bool = False) -> list[FuncRef]:
    """``obj.meth(...)`` on an object of unknown type: the file's class that defines ``meth`` (one, or one
    hierarchy's; every one for the elements of a collection), when the name is not a common library
    method's."""
    if attr.startswith("__") or attr in LIBRARY_METHOD_NAMES:
        return []
    return methods_of_file(facts.module, attr, facts.project, other_than=facts.cls, duck_typed=duck_typed)


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
    seen: set = set()
    queue: list[_Visit] = []
    if region.span is not None and region.scope is not None:
        queue.append(_Visit(region.scope, region.span, [], ALL_INPUTS))
    for root in region.roots:
        queue.append(_Visit(root, None, [_step(root, None)], ALL_INPUTS))
    for passed in region.passed:  # callables handed to a capture helper by its callers
        caller_step = {**_step(passed.caller, None), "line": passed.call.lineno}
        chain = [caller_step, _step(passed.target, passed.call.lineno)]
        queue.append(_Visit(passed.target, None, chain))
    runs_backward = _runs_backward(region, project)
    head = 0
    while head < len(queue):
        fref, span, chain, inputs, names = queue[head]
        head += 1
        binding = tuple(sorted(names.items()))
        key = (fref.key, span, binding)
        if key in seen:
            continue
        seen.add(key)
        if span is None:
            seen.add((fref.key, None, binding))
        facts = facts_of(project, fref)
        lo, hi = span if span is not None else (0, 1 << 30)
        reached.append((facts, (lo, hi), chain))
        # (a block that holds the capture itself, ``if self.graph is None: ... capture``, is the region's own code)
        lazy = [(first, last) for first, last in _lazy_blocks(facts) if not (span is not None and first <= lo <= last)]
        for hazard in facts.hazards(scan):
            line = getattr(hazard.node, "lineno", 0)
            if lo <= line <= hi and (hazard.on_input is None or inputs is ALL_INPUTS or hazard.on_input in inputs) \
                    and not any(first <= line <= last for first, last in lazy):
                emit(hazard, facts, chain)
        if len(chain) >= (CANDIDATE_DEPTH if region.klass == "candidate" else MAX_DEPTH):
            continue
        for getter, line in _properties_read(facts, lo, hi):  # ``self.scale``: reading it runs the getter
            if (getter.key, None, ()) not in seen:
                queue.append(_Visit(getter, None, [*chain, _step(getter, line)]))
        for wrapper in _decorator_wrappers(fref) if span is None else ():  # ``@timed def step(...)``
            if (wrapper.key, None, ()) not in seen:
                queue.append(_Visit(wrapper, None, [*chain, _step(wrapper, fref.line)]))
        for call in facts.calls:
            line = call.node.lineno
            if not (lo <= line <= hi):
                continue
            targets = resolve_call(facts, call, names)
            if targets and _is_apply(call) and runs_backward:  # its backward is captured as well
                targets = [*targets, *_backward_of(targets[0], project)]
            for target in targets:
                if _applied_elsewhere(call, facts, target, region):
                    continue
                passed_names = _names_passed(call.node, target)
                if (target.key, None, tuple(sorted(passed_names.items()))) in seen:
                    continue
                project.seed(target, argument_kinds(facts, call.node, target))
                queue.append(_Visit(target, None, [*chain, _step(target, line)],
                                    _inputs_passed(call.node, target, inputs, facts), passed_names))
    return reached


def _lazy_blocks(facts) -> list[tuple[int, int]]:
    """The lines of ``if self._mask is None: self._mask = ...`` (or ``if not hasattr(self, "_mask")``) blocks that
    build a value once and keep it: the first call (a warm-up, or the call a compile traces) runs them; a capture
    after it, or the next call, finds the value built and skips them."""
    out = []
    for node in ast.walk(facts.fref.node):
        if type(node) is not ast.If or node.orelse:
            continue
        kept = _tested_unbuilt(node.test)
        if kept is not None and any(type(stmt) is ast.Assign and any(dotted_text(t) == kept for t in stmt.targets)
                                    for stmt in node.body):
            out.append((node.body[0].lineno, node.body[-1].end_lineno))
    return out


def _tested_unbuilt(test) -> str | None:
    """``self._mask is None`` / ``not hasattr(self, "_mask")`` -> ``self._mask``."""
    if type(test) is ast.Compare and len(test.ops) == 1 and type(test.ops[0]) is ast.Is \
            and type(test.comparators[0]) is ast.Constant and test.comparators[0].value is None \
            and type(test.left) is ast.Attribute:
        return dotted_text(test.left)
    if type(test) is ast.UnaryOp and type(test.op) is ast.Not and type(test.operand) is ast.Call \
            and type(test.operand.func) is ast.Name and test.operand.func.id == "hasattr" and len(test.operand.args) == 2 \
            and type(test.operand.args[0]) is ast.Name and type(test.operand.args[1]) is ast.Constant:
        return f"{test.operand.args[0].id}.{test.operand.args[1].value}"
    return None


def _decorator_wrappers(fref: FuncRef) -> list[FuncRef]:
    """The wrappers that the file's own decorators put around a function (``@timed``, ``@retry(3)``):
    calling the function runs them. A wrapper is a function nested in the decorator (or in the decorator
    its factory returns) that its enclosing function returns; one taking ``self`` first belongs to the
    decorated method's class."""
    node = fref.node
    if type(node) not in (ast.FunctionDef, ast.AsyncFunctionDef) or not node.decorator_list:
        return []
    module = fref.module
    out = []
    for deco in node.decorator_list:
        called = deco.func if type(deco) is ast.Call else deco
        decorator = module.defs.get(called.id) if type(called) is ast.Name else None
        text = source_of(FuncRef(module, decorator, None, called.id)) if decorator is not None else ""
        if decorator is None or _CAPTURING.search(text) or _CAPTURE_GUARD.search(text):
            continue  # a decorator that captures or compiles what it wraps makes a region of its own; one that
            # asks whether a capture is under way (``if torch.cuda.is_current_stream_capturing(): return fn(...)``)
            # keeps its own code out of it
        for outer in (n for n in ast.walk(decorator) if type(n) in (ast.FunctionDef, ast.AsyncFunctionDef)):
            returned = {r.value.id for r in outer.body if type(r) is ast.Return and type(r.value) is ast.Name}
            for inner in outer.body:
                if type(inner) in (ast.FunctionDef, ast.AsyncFunctionDef) and inner.name in returned \
                        and not (outer is decorator and type(deco) is ast.Call):  # a factory's own return is the decorator
                    params = inner.args.args
                    cls = fref.cls if params and params[0].arg == "self" else None
                    out.append(FuncRef(module, inner, cls, inner.name))
    return out


def _properties_read(facts, lo: int, hi: int) -> list[tuple[FuncRef, int]]:
    """The getters of properties (``@property``) that the lines ``lo``..``hi``
    read: on ``self``, or on an object of one of the project's classes (``self.wind.drift``), with the line
    of the first read."""
    out: dict = {}
    for node in (*facts.self_loads, *facts.attr_loads):
        if not lo <= node.lineno <= hi:
            continue
        if is_self_attr(node, facts.self_name):
            cls = facts.cls
        else:
            owner = facts.infer(node.value)
            cls = owner[1] if type(owner) is tuple and owner[0] == "inst" else None
        if cls is None or (id(cls), node.attr) in out:
            continue
        getter = cls.find_method(node.attr, facts.project)
        if getter is not None and any(_names_property(d) for d in getter.node.decorator_list):
            out[(id(cls), node.attr)] = (getter, node.lineno)
    return list(out.values())


def _names_property(decorator) -> bool:
    """``@property``: its getter runs on every read. (A ``cached_property`` runs once, in the warm-up.)"""
    return type(decorator) is ast.Name and decorator.id == "property"


def _is_apply(call) -> bool:
    return type(call.node.func) is ast.Attribute and call.node.func.attr == "apply"


def _backward_of(forward: FuncRef, project) -> list[FuncRef]:
    """The ``backward`` of the custom autograd function whose ``forward`` this is."""
    if forward.name != "forward" or forward.cls is None or not forward.cls.is_autograd_function(project):
        return []
    backward = forward.cls.find_method("backward", project)
    return [backward] if backward is not None else []


def _runs_backward(region, project) -> bool:
    """The capture records the backward pass too: ``make_graphed_callables`` graphs both, and a captured
    training step calls ``loss.backward()`` (or ``torch.autograd.grad``) between its lines."""
    if region.kind in ("make_graphed_callables", "te.make_graphed_callables"):
        return True
    if region.span is None or region.scope is None:
        return False
    lo, hi = region.span
    return any(lo <= c.node.lineno <= hi and (c.meth == "backward" or c.qual == "torch.autograd.grad")
               for c in facts_of(project, region.scope).calls)


def _applied_elsewhere(call, facts, target: FuncRef, region) -> bool:
    """``Fn.apply(...)`` of a custom autograd function in another file than the capture: a library's
    fused operation (Transformer Engine's attention, routers), whose forward is followed only where
    the captured script itself applies it. Inside a library such a forward holds configuration-dependent
    paths (context parallelism, debug printing) that the capture in view does not take."""
    return _is_apply(call) and facts.module is not region.module \
        and target.cls is not None and target.cls.is_autograd_function(facts.project)


# The region's own function: each of its parameters holds an input of the compiled or graphed callable.
ALL_INPUTS = frozenset({"*"})


class _Visit(NamedTuple):
    """A function to visit in a region walk: the lines of it that run (all when None), the calls that lead
    there, which of its parameters hold the region's inputs, and the strings passed for its dispatching
    parameters."""

    fref: FuncRef
    span: tuple[int, int] | None
    chain: list
    inputs: frozenset = frozenset()
    names: dict = {}


def _inputs_passed(call: ast.Call, target: FuncRef, inputs: frozenset, facts) -> frozenset:
    """The parameters of ``target`` that a call hands the region's inputs: ``_sanitize_(img)`` in a
    compiled ``choose(img)`` makes ``_sanitize_``'s parameter an input (mutating it mutates the input)."""
    if not inputs or type(target.node) is ast.Module:
        return frozenset()
    params = target.positional_params
    out = set()
    for param in params:
        arg = argument_for(call, params, param)
        if type(arg) is ast.Name and (inputs is ALL_INPUTS and arg.id in facts.params or arg.id in inputs):
            out.add(param)
    return frozenset(out)


def _names_passed(call: ast.Call, target: FuncRef) -> dict[str, str]:
    """The string constants a call passes to a function that dispatches on a name with ``getattr``
    (``self._fire("on_loss", loss)``): that function is followed once per set of names, so each call
    reaches the methods it names, not those of every call site."""
    if type(target.node) is ast.Module or "getattr(" not in source_of(target):
        return {}
    out = {}
    for param in target.positional_params:
        arg = argument_for(call, target.positional_params, param)
        if type(arg) is ast.Constant and isinstance(arg.value, str):
            out[param] = arg.value
    return out


def _step(fref: FuncRef, call_line: int | None) -> dict:
    return {"name": fref.display, "line": fref.line, "path": fref.module.path, "call_line": call_line}


__all__ = ["argument_kinds", "resolve_call", "resolve_callable", "walk"]
