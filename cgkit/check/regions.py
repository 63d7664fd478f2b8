"""Where capture happens.

Region kinds:

* ``torch.cuda.graph``: the body of ``with torch.cuda.graph(g):`` (any import or alias form);
* ``capture_begin``: the statements between ``g.capture_begin()`` and ``g.capture_end()``;
* ``torch.compile``: a function or module ``forward`` compiled with a CUDA-graph mode
  (``mode="reduce-overhead"`` / ``"max-autotune"``, ``options={"triton.cudagraphs": True}``,
  ``backend="cudagraphs"``), as a decorator or a call;
* ``make_graphed_callables`` / ``te.make_graphed_callables``: each callable passed (a module's
  ``forward``, or a function), alone or in a tuple/list;
* ``declared``: functions named in ``--region`` or ``[tool.cgkit] regions``;
* ``candidate``: with no region anywhere, each ``nn.Module.forward`` and training-step function.

Finding regions costs almost nothing for files without any: a regex finds the lines that could
hold one, and only statements spanning those lines are looked at.
"""

from __future__ import annotations

import ast
import bisect
import re

from cgkit.check.callers import argument_for, call_sites, functions_of, seed_from_callers
from cgkit.check.facts import TENSOR, attr_kind, facts_of
from cgkit.check.model import kind_class
from cgkit.check.names import add_import, bound_values, dotted
from cgkit.check.project import (
    _NESTED_BLOCKS,
    FUNC_TYPES,
    ClassIndex,
    FuncRef,
    ModuleIndex,
    Project,
    _block_bodies,
)

_WORDS = ("graph", "capture_begin", "compile", "make_graphed_callables")
_BASE_RE = re.compile(r"\b(?:graph|capture_begin|compile|make_graphed_callables)\b")
_GRAPH_QUALS = ("torch.cuda.graph",)
_COMPILE_QUALS = ("torch.compile",)
_MGC_QUALS = {
    "torch.cuda.make_graphed_callables": "make_graphed_callables",
    "transformer_engine.pytorch.make_graphed_callables": "te.make_graphed_callables",
}
_CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")
_BLOCKS = (*_NESTED_BLOCKS, ast.Match)
_STEP_NAME = re.compile(r"^(?:train(?:ing)?_?(?:step|iter|iteration|batch|one_step|one_batch)|step_fn|train_fn)$")


class Region:
    def __init__(self, kind: str, module: ModuleIndex, node, stmt, name: str):
        self.kind = kind
        self.klass = kind_class(kind)
        self.module = module
        self.node = node  # the with-item call / capture_begin call / compile or graphing call / def
        self.stmt = stmt  # the statement holding it
        self.name = name
        self.line = getattr(node, "lineno", 1)
        self.scope: FuncRef | None = None  # the function around a with/capture_begin region
        self.span: tuple[int, int] | None = None  # lines captured inside ``scope``
        self.ancestors: list[ast.stmt] = []  # enclosing statements inside ``scope``
        self.roots: list[FuncRef] = []  # functions that are captured as a whole
        self.roots_guessed = False  # roots are the file's modules, for callables of unknown type
        self.graph_expr = None  # ``g`` in torch.cuda.graph(g) / g.capture_begin()
        self.targets: list[ast.expr] = []  # callables passed to make_graphed_callables / compile
        self.reached: list = []  # (facts, (first, last line), chain) of each function the region runs, once walked
        self.passed: list = []  # callables that callers hand to this region's helper (cgkit.check.passed)
        # compile options read from the object's class (``**self.compile_kwargs``): the classes whose
        # options turn CUDA graphs on; None when the options do not depend on the class
        self.graphed_classes: frozenset[str] | None = None
        self.set_as: list[str] = []  # ``self.tag`` for ``setattr(self, "tag", torch.compile(self._tag))``

    def as_dict(self) -> dict:
        return {"kind": self.kind, "line": self.line, "name": self.name, "path": self.module.path}


def find_regions(module: ModuleIndex, project: Project) -> list[Region]:
    text = module.text
    # Lines that can hold a region name one of the region functions (or a name they are imported
    # under). A module alias (``import torch.cuda as tc``) needs no word of its own: ``tc.graph(g)``
    # still says ``graph``, and every line that says ``torch`` would be a hit.
    aliases = [name for name, qual in module.imports.items() if _is_region_function(qual) and name not in _WORDS]
    aliases.extend(_context_aliases(text, module))
    compile_partials = _compile_partials(module) if "partial" in text else {}
    aliases.extend(compile_partials)
    if aliases:
        words = "|".join(map(re.escape, [*_WORDS, *aliases]))
        pattern = re.compile(rf"\b(?:{words})\b")
    else:
        pattern = _BASE_RE
    hits, line, position = [], 1, 0
    for match in pattern.finditer(text):
        line += text.count("\n", position, match.start())
        position = match.start()
        if not hits or hits[-1] != line:
            hits.append(line)
    if not hits:
        return []
    finder = _Finder(module, project, hits)
    finder.compile_partials = compile_partials
    finder.block(module.tree.body, module.body_ref, None, [])
    return finder.regions


def _compile_partials(module) -> dict[str, ast.Call]:
    """Module-level ``graph_compile = functools.partial(torch.compile, mode="reduce-overhead")``: name ->
    the partial call (its keywords are the compile's options)."""
    out = {}
    for stmt in module.tree.body:
        if type(stmt) is ast.Assign and len(stmt.targets) == 1 and type(stmt.targets[0]) is ast.Name \
                and type(stmt.value) is ast.Call and stmt.value.args:
            call = stmt.value
            if module.qual(call.func) == "functools.partial" and module.qual(call.args[0]) in _COMPILE_QUALS \
                    and _cudagraph_mode(call):
                out[stmt.targets[0].id] = call
    return out


_WITH_ITEMS = re.compile(r"\bwith\s+([^:\n]*)")  # the items of a with statement (its first line)
_ITEM_CALL = re.compile(r"(?:^|,)\s*(\w+)\(")  # ``no_grad(), graph_capture(...)``: each item's callee


def _context_aliases(text: str, module) -> list[str]:
    """Names a ``with NAME(...)`` (or ``with a(), NAME(...)``) enters that may be a graph context: bound to one somewhere
    (``graph_ctx = torch.cuda.graph``, ``ctx = self.device_module.graph``), named like one, or a
    function of this file (a factory or a context manager around a capture). Candidates only:
    _Finder._graph_context decides."""
    out = []
    if "with " not in text or "graph" not in text:
        return out
    for name in {n for m in _WITH_ITEMS.finditer(text) for n in _ITEM_CALL.findall(m.group(1))}:
        if name in _WORDS:
            continue
        if "graph" in name.lower() or name in module.defs \
                or re.search(rf"\b{re.escape(name)}\s*=[^=][\s\S]{{0,400}}?\.graph\b", text):
            out.append(name)
    return out


def _is_region_function(qual: str) -> bool:
    return qual in _GRAPH_QUALS or qual in _COMPILE_QUALS or qual in _MGC_QUALS


class _Finder:
    def __init__(self, module: ModuleIndex, project: Project, hits: list[int]):
        self.module = module
        self.project = project
        self.hits = hits
        self.regions: list[Region] = []
        self.local_imports: dict[int, dict[str, str]] = {}
        self.compile_partials: dict[str, ast.Call] = {}

    def _spans_hit(self, lo: int, hi: int) -> bool:
        i = bisect.bisect_left(self.hits, lo)
        return i < len(self.hits) and self.hits[i] <= hi

    def block(self, stmts, scope: FuncRef, cls: ClassIndex | None, ancestors: list) -> None:
        for index, stmt in enumerate(stmts):
            lo = stmt.lineno
            decorators = getattr(stmt, "decorator_list", None)
            if decorators:
                lo = min(lo, *(d.lineno for d in decorators))
            if not self._spans_hit(lo, stmt.end_lineno):
                continue
            t = type(stmt)
            if t in FUNC_TYPES:
                ref = FuncRef(self.module, stmt, cls, stmt.name)
                for dec in stmt.decorator_list:
                    partial = dec.func if type(dec) is ast.Call else dec  # ``@rcompile``, a partial of torch.compile
                    if (type(partial) is ast.Name and partial.id in self.compile_partials) or (
                            type(dec) is ast.Call and self._qual(scope, dec.func) in _COMPILE_QUALS and _cudagraph_mode(dec, scope)):
                        region = Region("torch.compile", self.module, dec, stmt, f"@torch.compile {ref.display}")
                        region.roots.append(ref)
                        region.scope = scope
                        self.regions.append(region)
                self.block(stmt.body, ref, None, [])
                continue
            if t is ast.ClassDef:
                inner = self.module.classes.get(stmt.name)
                if inner is None or inner.node is not stmt:
                    inner = ClassIndex(self.module, stmt)
                self.block(stmt.body, scope, inner, [])
                continue
            self._header(stmt, stmts, index, scope, ancestors, cls)
            if isinstance(stmt, _BLOCKS):
                inner_anc = [*ancestors, stmt]
                for name in ("body", "orelse", "finalbody"):
                    body = getattr(stmt, name, None)
                    if body:
                        self.block(body, scope, cls, inner_anc)
                for handler in getattr(stmt, "handlers", ()) or ():
                    self.block(handler.body, scope, cls, inner_anc)
                for case in getattr(stmt, "cases", ()) or ():
                    self.block(case.body, scope, cls, inner_anc)

    def _qual(self, scope: FuncRef, node) -> str | None:
        local = None
        if type(scope.node) is not ast.Module:
            local = self.local_imports.get(id(scope.node))
            if local is None:
                local = {}
                for stmt in scope.node.body:
                    if type(stmt) in (ast.Import, ast.ImportFrom):
                        add_import(stmt, self.module.modname, self.module.is_package, local)
                self.local_imports[id(scope.node)] = local
        return self.module.qual(node, local or None)

    def _graph_context(self, scope: FuncRef, cls, func, depth: int = 0) -> bool:
        """``torch.cuda.graph`` under any name: an import alias, ``<device module>.graph`` (from
        ``torch.get_device_module``), or a local name bound to one of those."""
        if depth > 2:
            return False
        if self._qual(scope, func) in _GRAPH_QUALS:
            return True
        t = type(func)
        if t is ast.Attribute:
            return func.attr == "graph" and self._device_module(scope, cls, func.value)
        if t is ast.IfExp:
            return self._graph_context(scope, cls, func.body, depth + 1) or self._graph_context(scope, cls, func.orelse, depth + 1)
        if t is ast.Name and type(scope.node) is not ast.Module:
            for node in ast.walk(scope.node):
                if type(node) is ast.Assign and any(type(tg) is ast.Name and tg.id == func.id for tg in node.targets):
                    if self._graph_context(scope, cls, node.value, depth + 1):
                        return True
        if t in (ast.Name, ast.Attribute):
            return self._graph_factory(scope, func, depth)
        return False

    def _graph_factory(self, scope: FuncRef, func, depth: int) -> bool:
        """A project function that returns a graph context (``return device_module.graph(g, ...)``)."""
        target = self.module.resolve_expr(func, self.project, self.local_imports.get(id(scope.node)))
        if not isinstance(target, FuncRef) or type(target.node) not in FUNC_TYPES:
            return False
        finder = self if target.module is self.module else _Finder(target.module, self.project, [])
        for node in ast.walk(target.node):
            if type(node) is ast.Return and type(node.value) is ast.Call:
                if finder._graph_context(target, target.cls, node.value.func, depth + 1):
                    return True
            # a @contextmanager that yields inside a capture: the caller's with-block is captured
            if type(node) in (ast.With, ast.AsyncWith) and any(type(n) is ast.Yield for n in ast.walk(node)):
                for item in node.items:
                    expr = item.context_expr
                    if type(expr) is ast.Call and finder._graph_context(target, target.cls, expr.func, depth + 1):
                        return True
        return _yields_between_capture_calls(target.node)

    def _device_module(self, scope: FuncRef, cls, expr) -> bool:
        """``torch.cuda``, ``torch.get_device_module(...)``, or ``self.X`` set from one of them."""
        qual = self._qual(scope, expr)
        if qual == "torch.cuda":
            return True
        if type(expr) is ast.Call:
            return self._qual(scope, expr.func) in ("torch.get_device_module", "torch.accelerator.get_device_module")
        if type(expr) is ast.Name and type(scope.node) is not ast.Module:  # device_module = torch.get_device_module()
            for node in ast.walk(scope.node):
                if type(node) is ast.Assign and any(type(tg) is ast.Name and tg.id == expr.id for tg in node.targets) \
                        and type(node.value) is ast.Call and self._device_module(scope, cls, node.value):
                    return True
            return False
        owner = scope.cls or cls
        if type(expr) is ast.Attribute and type(expr.value) is ast.Name and expr.value.id == "self" and owner is not None:
            for method in owner.methods.values():
                for node in ast.walk(method):
                    if type(node) is ast.Assign and len(node.targets) == 1 and type(node.targets[0]) is ast.Attribute \
                            and node.targets[0].attr == expr.attr and type(node.value) is ast.Call:
                        if self._qual(scope, node.value.func) in ("torch.get_device_module", "torch.accelerator.get_device_module"):
                            return True
        return False

    def _header(self, stmt, stmts, index, scope: FuncRef, ancestors, cls=None) -> None:
        t = type(stmt)
        if t in (ast.With, ast.AsyncWith):
            for item in stmt.items:
                expr = item.context_expr
                if type(expr) is ast.Call and self._graph_context(scope, cls, expr.func):
                    region = Region("torch.cuda.graph", self.module, expr, stmt, f"with {_short(expr)}")
                    region.scope = scope
                    region.span = (stmt.body[0].lineno, stmt.end_lineno)
                    region.ancestors = list(ancestors)
                    region.graph_expr = expr.args[0] if expr.args else _kwarg(expr, "cuda_graph")
                    if self._qual(scope, expr.func) not in _GRAPH_QUALS and type(item.optional_vars) is ast.Name:
                        region.graph_expr = item.optional_vars  # ``with capture_helper(pool) as g:``
                    self.regions.append(region)
            exprs = [item.context_expr for item in stmt.items]
        elif isinstance(stmt, _NESTED_BLOCKS):
            exprs = [getattr(stmt, name) for name in ("test", "iter") if getattr(stmt, name, None) is not None]
        else:
            exprs = [stmt]
        for expr in exprs:
            for node in ast.walk(expr):
                if type(node) is not ast.Call:
                    continue
                func = node.func
                if type(func) is ast.Attribute and func.attr == "capture_begin":
                    self._capture_begin(node, stmt, stmts, index, scope, ancestors)
                    continue
                if type(func) is ast.Call:  # torch.compile(mode=...)(fn)
                    if self._qual(scope, func.func) in _COMPILE_QUALS and not func.args and _cudagraph_mode(func, scope):
                        self._compiled(node, func, node.args[0] if node.args else None, stmt, scope, ancestors)
                    continue
                if type(func) is ast.Name and func.id in self.compile_partials:  # a partial of torch.compile
                    target = node.args[0] if node.args else _kwarg(node, "model")
                    if target is not None:
                        self._compiled(node, node, target, stmt, scope, ancestors)
                    continue
                qual = self._qual(scope, func)
                if qual is None:
                    continue
                if qual in _COMPILE_QUALS and _cudagraph_mode(node, scope):
                    target = node.args[0] if node.args else _kwarg(node, "model")
                    if target is not None:
                        self._compiled(node, node, target, stmt, scope, ancestors)
                elif qual in _MGC_QUALS:
                    target = node.args[0] if node.args else (_kwarg(node, "callables") or _kwarg(node, "modules"))
                    seed_from_callers(scope, self.project)  # a graphing helper: what its callers pass
                    region = Region(_MGC_QUALS[qual], self.module, node, stmt, _short(node))
                    region.scope = scope
                    region.ancestors = list(ancestors)
                    if target is not None:
                        region.targets = _flatten(target)
                        region.roots = self._resolve_targets(region.targets, scope, stmt.lineno)
                        if not region.roots:  # ``tuple(layers)``, ``(enc, head)`` of untyped modules
                            for target_expr in region.targets:
                                region.roots += [r for r in self._modules_compiled_here(target_expr, scope) if r not in region.roots]
                            region.roots_guessed = bool(region.roots)
                        # Graphed callables are called with tensors: the parameters every call
                        # fills are tensors (those with defaults may keep them).
                        for root in region.roots:
                            self.project.seed(root, {p: TENSOR for p in root.required_params})
                    self.regions.append(region)

    def _compiled(self, node, compile_call, target, stmt, scope, ancestors) -> None:
        seed_from_callers(scope, self.project)  # ``def __init__(self, model): self.model = torch.compile(model)``
        region = Region("torch.compile", self.module, node, stmt, _short(compile_call))
        region.scope = scope
        region.graphed_classes = graphed_classes(compile_call, scope, self.project)
        if region.graphed_classes == frozenset():
            return  # no class of the file gives these options CUDA graphs
        region.ancestors = list(ancestors)
        if target is not None:
            region.targets = [target]
            region.roots = self._resolve_targets([target], scope, stmt.lineno) or self._decorated_with(scope, target) \
                or self._passed_in(scope, target) or self._modules_compiled_here(target, scope)
            alias = _assigned_name(stmt) if getattr(stmt, "value", None) is node else None
            for root in region.roots if alias else ():
                if alias != root.name:  # ``self.td_fn(obs, ...)`` calls ``_td_target`` under another name
                    seed_from_callers(root, self.project, called_as=alias)
            set_names = self._set_as(stmt, node, scope)
            if set_names and len(set_names) == len(region.roots):
                region.set_as = [f"{scope.node.args.args[0].arg}.{name}" for name in set_names]
                for root, name in zip(region.roots, set_names, strict=True):
                    if name != root.name:
                        seed_from_callers(root, self.project, called_as=name)
        self.regions.append(region)

    def _set_as(self, stmt, node, scope: FuncRef) -> list[str]:
        """``setattr(self, st, torch.compile(getattr(self, "_" + st)))`` over ``st`` in constant names: the
        attribute names the compiled methods are set as (``self.tag(ids)`` then calls ``_tag`` compiled)."""
        call = getattr(stmt, "value", None)
        if type(stmt) is not ast.Expr or type(call) is not ast.Call or type(call.func) is not ast.Name or \
                call.func.id != "setattr" or len(call.args) != 3 or call.args[2] is not node or scope.cls is None:
            return []
        owner = call.args[0]
        if type(owner) is not ast.Name or type(scope.node) is ast.Module or not scope.node.args.args or \
                owner.id != scope.node.args.args[0].arg:
            return []
        return constant_strings(facts_of(self.project, scope), call.args[1])

    def _decorated_with(self, scope: FuncRef, target) -> list[FuncRef]:
        """``def deco(fn): ... torch.compile(fn, ...)``, applied as ``@deco`` or ``@register("name", ...)`` (a
        factory that returns ``deco``): the functions decorated so are what it compiles."""
        node = scope.node
        if type(target) is not ast.Name or type(node) is ast.Module or target.id not in {a.arg for a in node.args.args}:
            return []
        names = {scope.name} | {outer.name for outer in _returning(self.module, scope.name)}
        return [fref for fref, _dec in decorated_by(self.module, names)]

    def _passed_in(self, scope: FuncRef, target) -> list[FuncRef]:
        """``def build(fn, **opts): return torch.compile(fn, **opts)``: what its callers pass as ``fn``."""
        if type(target) is not ast.Name or type(scope.node) is ast.Module or target.id not in scope.positional_params:
            return []
        out = []
        for caller, call in call_sites(self.project, scope.name, scope):
            arg = argument_for(call, scope.positional_params, target.id)
            if arg is not None:
                facts = facts_of(self.project, caller)
                out += [f for f in resolve_callable(facts, arg, call.lineno, self.project) if f not in out]
        return out

    def _modules_compiled_here(self, target, scope: FuncRef) -> list[FuncRef]:
        """A compiled target the checker cannot type (``model.forward`` of a parameter, ``m`` from a
        dict of modules): the forwards of the modules this file defines are what it compiles, other than
        the class whose method compiles it (a module graphing its parts is not one of them)."""
        target = module_itself(target)
        if type(target) in (ast.Lambda, ast.Call, ast.Constant):
            return []
        if type(target) is ast.Attribute and target.attr != "forward":
            if target.attr.startswith("__") or target.attr in LIBRARY_METHOD_NAMES:
                return []  # ``torch.compile(opt.step)``
            if any(target.attr in cls.methods for cls in self.module.classes.values()):
                return methods_of_file(self.module, target.attr, self.project)  # ``torch.compile(model.decode_step)``
            # no method of that name: an object held in an attribute (``self.model``), compiled whole
        return modules_of_file(self.module, self.project, other_than=scope.cls)

    def _capture_begin(self, call, stmt, stmts, index, scope, ancestors) -> None:
        end_stmt = None
        for later in stmts[index + 1 :]:
            if "capture_end" in _call_attrs(later):
                end_stmt = later
                break
        region = Region("capture_begin", self.module, call, stmt, f"{_short(call.func.value)}.capture_begin()")
        region.scope = scope
        region.ancestors = list(ancestors)
        region.graph_expr = call.func.value
        first = stmts[index + 1].lineno if index + 1 < len(stmts) else stmt.end_lineno
        last = end_stmt.lineno - 1 if end_stmt is not None else stmts[-1].end_lineno
        region.span = (first, max(first, last))
        self.regions.append(region)

    def _resolve_targets(self, targets, scope: FuncRef, line: int) -> list[FuncRef]:
        facts = facts_of(self.project, scope)
        out: list[FuncRef] = []
        for target in targets:
            out.extend(resolve_callable(facts, target, line, self.project))
        return out


# Methods that library objects have too (optimizers, loggers, queues, dicts, tensors, streams): a call of
# one of these on an object of unknown type is not taken for the file's own method of that name.
LIBRARY_METHOD_NAMES = frozenset("""
    step update zero_grad get items keys values append extend pop insert run copy_ to cuda cpu reset clear add
    put send wait synchronize record replay capture_begin capture_end backward apply format join read write
    close start stop info debug warning error log load save state_dict load_state_dict train eval parameters
    modules children named_parameters register_buffer register_forward_hook sample generate fill_ zero_ item
""".split())


def resolve_callable(facts, expr, line: int, project: Project, _depth: int = 0) -> list[FuncRef]:
    """What a callable expression runs when called: a module's forward, a function, a method."""
    if _depth > 4:
        return []
    t = type(expr)
    if t is ast.Name:
        name = expr.id
        if name in facts.local_defs:
            return [project.local_def(facts, name)]
        kind = kind_at(facts, name, line)
        # ``global f; f = torch.compile(f)`` compiles the module's function ``f``.
        stored_before = any(s.name == name and s.node.lineno < line for s in facts.stores)
        registry = _registry_iterated(facts, name)
        if registry is not None:  # ``for name, fn in STAGES.items(): torch.compile(fn)``
            return registry_members(facts.module, registry, project)
        if kind is None and name not in facts.params and (name in facts.global_names or not stored_before):
            target = facts.module.resolve_expr(expr, project, facts.local_imports)
            if isinstance(target, FuncRef):
                return [target]
            return []
        return kind_targets(kind, facts, project, _depth)
    if t is ast.Attribute:
        value = expr.value
        if type(value) is ast.Name and value.id == facts.self_name and facts.cls is not None:
            method = facts.cls.find_method(expr.attr, project)
            if method is not None:
                return [method]
            found = kind_targets(attr_kind(facts.cls, expr.attr, project), facts, project, _depth)
            # a mixin compiling ``self._predict`` that only the classes built on it define
            return found or project.overrides(facts.cls, expr.attr)
        owner = facts.infer(value)
        if type(owner) is tuple and owner[0] == "inst":
            method = owner[1].find_method(expr.attr, project)
            return [method] if method is not None else []
        kind = facts.infer(expr)
        if kind is not None:
            return kind_targets(kind, facts, project, _depth)
        target = facts.module.resolve_expr(expr, project, facts.local_imports) if dotted(expr) else None
        if isinstance(target, FuncRef):
            return [target]
        return []
    if t is ast.Call:
        if type(expr.func) is ast.Name and expr.func.id == "getattr" and len(expr.args) >= 2:
            return _getattr_methods(facts, expr, line, project, _depth)
        if expr.args and facts.module.qual(expr.func) == "functools.partial":  # ``partial(attn, q, k, cfg)``
            return resolve_callable(facts, expr.args[0], line, project, _depth + 1)
        found = kind_targets(facts.infer(expr), facts, project, _depth)
        inner = module_itself(expr)
        if not found and inner is not expr:  # ``encoder.cuda()``, ``model.eval()``: the module itself
            return resolve_callable(facts, inner, line, project, _depth + 1)
        if not found:  # ``make_step(model, opt)`` (or a registry's factory): the closure it returns
            for factory in resolve_callable(facts, expr.func, line, project, _depth + 1):
                found += [r for r in _returned_closures(factory) if r not in found]
        return found
    if t is ast.Subscript and type(expr.value) is ast.Name and _top_level_bound(facts.module, expr.value.id):
        return registry_members(facts.module, expr.value.id, project)  # ``torch.compile(REGISTRY[name])``
    if t in (ast.IfExp, ast.BoolOp):  # ``self._audited(lane) if audit else None``, ``extra_body or self.body``
        found = []
        for operand in ([expr.body, expr.orelse] if t is ast.IfExp else expr.values):
            found += [f for f in resolve_callable(facts, operand, line, project, _depth + 1) if f not in found]
        return found
    if t is ast.Lambda:  # ``lambda h, s: edge_scores(h, s, cfg)``, ``lambda ids: model(ids).argmax(-1)``
        found = []
        for call in ast.walk(expr.body):
            if type(call) is ast.Call and type(call.func) in (ast.Name, ast.Attribute):
                found += [f for f in resolve_callable(facts, call.func, line, project, _depth + 1) if f not in found]
        return found
    return []


def _returned_closures(factory: FuncRef) -> list[FuncRef]:
    """The functions a factory defines inside itself and returns (``def step(): ...; return step``)."""
    node = factory.node
    if type(node) not in FUNC_TYPES:
        return []
    inner = {n.name: n for n in node.body if type(n) in FUNC_TYPES}
    return [FuncRef(factory.module, inner[r.value.id], None, r.value.id) for r in ast.walk(node)
            if type(r) is ast.Return and type(r.value) is ast.Name and r.value.id in inner]


def _registry_iterated(facts, name: str) -> str | None:
    """The module-level dict whose functions a loop variable takes: ``fn`` in ``for name, fn in
    STAGES.items()`` or ``for fn in STAGES.values()``."""
    for it, target in facts.loops_binding(name):
        if type(it) is not ast.Call or type(it.func) is not ast.Attribute:
            continue
        owner = it.func.value
        if type(owner) is not ast.Name or not _top_level_bound(facts.module, owner.id):
            return None
        if it.func.attr == "values" and type(target) is ast.Name:
            return owner.id
        if it.func.attr == "items" and type(target) is ast.Tuple and len(target.elts) == 2 and \
                type(target.elts[1]) is ast.Name and target.elts[1].id == name:
            return owner.id
    return None


def _top_level_bound(module: ModuleIndex, name: str) -> bool:
    """Whether the module's top level assigns ``name`` (``STAGES = {}``, ``STAGES, COMPILED = {}, {}``)."""
    for stmt in module.tree.body:
        targets = stmt.targets if type(stmt) is ast.Assign else [stmt.target] if type(stmt) is ast.AnnAssign else []
        for t in targets:
            if any(type(n) is ast.Name and n.id == name for n in ([t] if type(t) is ast.Name else getattr(t, "elts", []))):
                return True
    return False


def registry_members(module: ModuleIndex, registry: str, project: Project) -> list[FuncRef]:
    """The functions of the file a module-level dict holds: those a registering decorator stores in it
    (``def register(name): def deco(fn): REGISTRY[name] = fn``), those stored by name at the top level
    (``REGISTRY["fridge"] = fridge``), and those of its literal (``{"fridge": fridge}``)."""
    names: set[str] = set()
    registering: set[str] = set()
    for fn in ast.walk(module.tree):
        if type(fn) not in FUNC_TYPES:
            continue
        params = {a.arg for a in fn.args.args}
        for node in ast.walk(fn):
            if type(node) is ast.Assign and type(node.value) is ast.Name and node.value.id in params and any(
                    type(t) is ast.Subscript and type(t.value) is ast.Name and t.value.id == registry for t in node.targets):
                registering.add(fn.name)
                registering.update(outer.name for outer in enclosing_functions(module, fn))
    for value in bound_values(module.tree.body, registry):
        if type(value) is ast.Dict:
            names.update(v.id for v in value.values if type(v) is ast.Name)
    for stmt in module.tree.body:
        if type(stmt) is ast.Assign and type(stmt.value) is ast.Name and any(
                type(t) is ast.Subscript and type(t.value) is ast.Name and t.value.id == registry for t in stmt.targets):
            names.add(stmt.value.id)
    out = [fref for fref, _dec in decorated_by(module, registering) if fref.cls is None] if registering else []
    out += [FuncRef(module, module.defs[n], None, n) for n in sorted(names) if n in module.defs]
    return out


def _getattr_methods(facts, call, line: int, project: Project, depth: int) -> list[FuncRef]:
    """``getattr(self, "_" + stage)`` with ``stage`` looping over string constants, or ``getattr(obj,
    "name")``: the methods those names give."""
    owner, name = call.args[0], call.args[1]
    names = constant_strings(facts, name)
    if not names:
        return []
    out = []
    for attr in names:
        out += [f for f in resolve_callable(facts, ast.Attribute(value=owner, attr=attr, ctx=ast.Load()), line, project,
                                            depth + 1) if f not in out]
    return out


def constant_strings(facts, expr) -> list[str]:
    """The strings an expression can be: a constant, ``"_" + stage`` over a loop of constants."""
    if type(expr) is ast.Constant and isinstance(expr.value, str):
        return [expr.value]
    if type(expr) is ast.BinOp and type(expr.op) is ast.Add:
        left, right = constant_strings(facts, expr.left), constant_strings(facts, expr.right)
        return [a + b for a in left for b in right]
    if type(expr) is ast.Name:
        for it, _target in facts.loops_binding(expr.id):
            if type(it) is ast.Attribute and type(it.value) is ast.Name and it.value.id == facts.self_name \
                    and facts.cls is not None:  # ``for st in self.stages`` with ``stages = ("tag", ...)``
                it = next((v for c in facts.cls.mro(facts.project) for v in [c.field(it.attr)] if v is not None), None)
            if type(it) in (ast.Tuple, ast.List) and \
                    all(type(e) is ast.Constant and isinstance(e.value, str) for e in it.elts):
                return [e.value for e in it.elts]
        if expr.id in facts.params and not any(s.name == expr.id for s in facts.stores):
            return _strings_passed(facts.fref, expr.id, facts.project)
    return []


def _strings_passed(fref, param: str, project: Project) -> list[str]:
    """The string constants the file's callers pass for ``param``: ``self._fire("on_loss", loss)`` gives
    ``hook`` in ``def _fire(self, hook, *args)`` the value ``"on_loss"``."""
    if type(fref.node) is ast.Module or param not in fref.positional_params:
        return []
    out = []
    for _caller, call in call_sites(project, fref.name, fref):
        arg = argument_for(call, fref.positional_params, param)
        if type(arg) is ast.Constant and isinstance(arg.value, str) and arg.value not in out:
            out.append(arg.value)
    return out


def modules_of_file(module: ModuleIndex, project: Project, other_than: ClassIndex | None = None) -> list[FuncRef]:
    """The forwards of the ``nn.Module`` classes a file defines: what a model of unknown type in that file
    runs when it is called, compiled or graphed (a guess from the file, not from the code's types)."""
    return [FuncRef(module, cls.methods["forward"], cls, "forward") for cls in module.classes.values()
            if cls is not other_than and "forward" in cls.methods and cls.is_module(project)]


def methods_of_file(module: ModuleIndex, name: str, project: Project, other_than: ClassIndex | None = None,
                    duck_typed: bool = False) -> list[FuncRef]:
    """The method ``name`` of the file's one class that defines it (other than ``other_than``), or of each
    class of one hierarchy that does (callbacks overriding a base's method); nothing when unrelated
    classes share the name, unless the call is ``duck_typed``: made on each element of a collection the
    object holds (``for cb in self.callbacks: cb.on_step_end(...)``), where every such class may be one."""
    owners = [cls for cls in module.classes.values() if cls is not other_than and name in cls.methods]
    if len(owners) > 1 and not duck_typed and \
            not any(all(base in other.mro(project) for other in owners) for base in owners):
        return []
    return [FuncRef(module, cls.methods[name], cls, name) for cls in owners]


# Module methods that return the module itself: ``torch.compile(model.cuda())`` compiles ``model``.
_RETURNS_SELF = frozenset("cuda to eval train half float bfloat16 double requires_grad_ share_memory".split())


def module_itself(expr):
    """``model`` for ``model.cuda().eval()``; the expression itself otherwise."""
    while type(expr) is ast.Call and type(expr.func) is ast.Attribute and expr.func.attr in _RETURNS_SELF:
        expr = expr.func.value
    return expr


def kind_targets(kind, facts, project: Project, depth: int = 0) -> list[FuncRef]:
    if type(kind) is not tuple:
        return []
    tag = kind[0]
    if tag == "inst":
        method = kind[1].find_method("forward", project)
        if method is None:
            method = kind[1].find_method("__call__", project)
        return [method] if method is not None else []
    if tag == "ddp":
        return kind_targets(kind[2], facts, project, depth + 1) if len(kind) > 2 else []
    if tag == "modules":  # calling an nn.Sequential runs each module's forward
        out = []
        for cls in kind[2]:
            out.extend(kind_targets(("inst", cls), facts, project, depth + 1))
        return out
    if tag == "compiled":
        call = kind[1]
        target = call.args[0] if call.args else None
        if target is not None:
            return resolve_callable(facts, target, call.lineno, project, depth + 1)
    if tag == "nn" and kind[1] == "torch.nn.Module":  # ``model: nn.Module``: any module, such as the file's own
        return modules_of_file(facts.module, project, other_than=facts.cls)
    return []


def kind_at(facts, name: str, line: int):
    """The kind of ``name`` as last assigned before ``line`` (``model = torch.compile(model)``)."""
    kind = None
    found = False
    for store in facts.stores:
        # a comprehension's variable, in the statement at ``line``: ``[mgc(layer) for layer in self.layers]``
        if store.name == name and (store.node.lineno < line or (store.loop_target and store.node.lineno == line)):
            kind = store.kind
            found = True
    if not found:
        return facts.kind_of_name(name, (line, 0))
    return kind


def declared_regions(module: ModuleIndex, names: list[str]) -> list[tuple[str, Region]]:
    """(name, region) for each function of ``module`` a name declares: a qualified name (``func``,
    ``Class.method``, ``outer.inner``, ``Class.method.inner``), a class (its ``forward``), or a bare name
    that is no top-level function or class here, for the functions and methods of that name."""
    functions, classes = qualified_names(module)
    out = []
    for spec in names:
        refs = []
        if spec in functions:
            refs = [functions[spec]]
        elif spec in classes:
            forward = functions.get(f"{spec}.forward")
            refs = [forward] if forward is not None else []
        elif "." not in spec:
            refs = [ref for qual, ref in functions.items() if qual.endswith("." + spec)]
        for ref in refs:
            out.append((spec, _root_region("declared", module, ref, f"declared region {spec}")))
    return out


def qualified_names(module: ModuleIndex) -> tuple[dict[str, FuncRef], dict[str, ast.ClassDef]]:
    """Every function of a module by its qualified name (as ``__qualname__`` without ``<locals>``:
    ``f``, ``Class.method``, ``outer.inner``), and every class."""
    functions: dict[str, FuncRef] = {}
    classes: dict[str, ast.ClassDef] = {}

    def visit(body, prefix: str, cls: ClassIndex | None) -> None:
        stack = [body]
        while stack:
            for stmt in stack.pop():
                t = type(stmt)
                if t in FUNC_TYPES:
                    qual = prefix + stmt.name
                    if prefix:  # a method or nested function: the first of a name, as ClassIndex keeps it
                        functions.setdefault(qual, FuncRef(module, stmt, cls, stmt.name))
                    else:  # a module's function: the last of a name, as ModuleIndex.defs keeps it
                        functions[qual] = FuncRef(module, stmt, None, stmt.name)
                    visit(stmt.body, qual + ".", None)
                elif t is ast.ClassDef:
                    qual = prefix + stmt.name
                    classes.setdefault(qual, stmt)
                    index = module.classes.get(stmt.name) if not prefix else None
                    visit(stmt.body, qual + ".", index if index is not None and index.node is stmt else None)
                elif isinstance(stmt, _BLOCKS):
                    stack.extend(_block_bodies(stmt))
                    stack.extend(case.body for case in getattr(stmt, "cases", ()))

    visit(module.tree.body, "", None)
    return functions, classes


def candidate_regions(module: ModuleIndex, project: Project) -> list[Region]:
    out = []
    for cls in module.classes.values():
        node = cls.methods.get("forward")
        if node is not None and cls.is_module(project):
            out.append(_root_region("candidate", module, FuncRef(module, node, cls, "forward"), f"candidate region {cls.name}.forward"))
    text = module.text
    backward_lines = None
    if ".backward(" in text:
        starts = [0]
        starts.extend(m.end() for m in re.finditer("\n", text))
        backward_lines = sorted({bisect.bisect_right(starts, m.start()) for m in re.finditer(r"\.backward\(", text)})
    for name, node in module.defs.items():
        if _STEP_NAME.match(name) or (backward_lines and _has_line(backward_lines, node.lineno, node.end_lineno) and "step" in name):
            out.append(_root_region("candidate", module, FuncRef(module, node, None, name), f"candidate region {name}()"))
    return out


def _has_line(lines, lo, hi) -> bool:
    i = bisect.bisect_left(lines, lo)
    return i < len(lines) and lines[i] <= hi


def _root_region(kind: str, module: ModuleIndex, ref: FuncRef, name: str) -> Region:
    region = Region(kind, module, ref.node, ref.node, name)
    region.roots = [ref]
    return region


def _assigned_name(stmt) -> str | None:
    """The name a statement binds its value to: ``fn`` or ``self.fn`` in ``fn = ...``; None otherwise."""
    if type(stmt) is not ast.Assign or len(stmt.targets) != 1:
        return None
    target = stmt.targets[0]
    return target.id if type(target) is ast.Name else target.attr if type(target) is ast.Attribute else None


def _yields_between_capture_calls(fn) -> bool:
    """``g.capture_begin()`` ... ``yield`` ... ``g.capture_end()`` (a @contextmanager around a capture)."""
    begins, ends, yields = [], [], []
    for node in ast.walk(fn):
        if type(node) is ast.Call and type(node.func) is ast.Attribute:
            if node.func.attr == "capture_begin":
                begins.append(node.lineno)
            elif node.func.attr == "capture_end":
                ends.append(node.lineno)
        elif type(node) in (ast.Yield, ast.YieldFrom):
            yields.append(node.lineno)
    return any(b < y < e for b in begins for y in yields for e in ends)


def _cudagraph_mode(call: ast.Call, scope: FuncRef | None = None) -> bool:
    """``mode="reduce-overhead"`` / ``"max-autotune"``, ``backend="cudagraphs"`` or the triton.cudagraphs
    option; a mode passed as a name counts when the name's default (a parameter of ``scope``) or its
    module-level value is one of them (``def __init__(self, compile_mode="max-autotune")``). Options
    spread from a dict, ``**COMPILE_OPTS`` with ``COMPILE_OPTS = {"mode": "reduce-overhead", ...}`` at
    the module's top level (or in ``scope``), count as written out, and so does ``options=CG`` with
    ``CG = {"triton.cudagraphs": True}`` there."""
    keywords = list(call.keywords)
    for kw in call.keywords:
        if kw.arg is None and scope is not None and type(kw.value) is ast.Call and \
                (dotted(kw.value.func) or [""])[-1] == "asdict":  # ``**asdict(self.plugin)``: a settings dataclass
            keywords += [ast.keyword(arg=field, value=v) for field in ("mode", "backend") for v in _field_values(field, scope)]
        if kw.arg is None and type(kw.value) is ast.Attribute and scope is not None:
            # ``**self.compile_kwargs``: a class-body dict of the file (one subclass may turn graphs on)
            if any(_cudagraph_mode(ast.Call(func=call.func, args=[], keywords=_as_keywords(d)))
                   for d in map(_as_dict, _field_values(kw.value.attr, scope)) if d is not None):
                return True
        spread = _spread_dict(kw.value, scope) if kw.arg is None and scope is not None else None
        if spread is not None:
            keywords += _as_keywords(spread)
    for kw in keywords:
        value = kw.value
        if kw.arg == "mode" and type(value) is ast.Name and scope is not None:
            value = _constant_of(value.id, scope) or value
        if kw.arg in ("mode", "backend") and type(value) is ast.Attribute and scope is not None:  # ``mode=cfg.compile_mode``
            wanted = _CUDAGRAPH_MODES if kw.arg == "mode" else ("cudagraphs",)
            if any(type(v) is ast.Constant and v.value in wanted for v in _field_values(value.attr, scope)):
                return True
        if kw.arg == "mode" and type(value) is ast.Constant and value.value in _CUDAGRAPH_MODES:
            return True
        if kw.arg == "backend" and type(value) is ast.Constant and value.value == "cudagraphs":
            return True
        if kw.arg == "options" and type(value) is ast.Attribute and scope is not None:  # ``options=self.compile_options``
            fields = [_dict_of(v.id, scope) if type(v) is ast.Name else v for v in _field_values(value.attr, scope)]
            if any(_cudagraph_mode(ast.Call(func=call.func, args=[], keywords=[ast.keyword(arg="options", value=d)]))
                   for d in fields if type(d) is ast.Dict):
                return True
        if kw.arg == "options" and type(value) is ast.Name and scope is not None:  # ``options=CG_OPTIONS``
            value = _dict_of(value.id, scope) or value
        if kw.arg == "options" and type(value) is ast.Dict:
            for key, val in zip(value.keys, value.values, strict=False):
                if type(key) is ast.Constant and key.value == "triton.cudagraphs" and type(val) is ast.Constant and val.value is True:
                    return True
    return False


def graphed_classes(call: ast.Call, scope: FuncRef, project: Project) -> frozenset[str] | None:
    """For compile options the object's class gives (``**self.compile_kwargs``, ``mode=self.compile_mode``,
    set in the class body and overridden by subclasses): the compiling class and those of its subclasses
    in the file whose options turn CUDA graphs on. None when the options do not come from the class."""
    node = scope.node
    if scope.cls is None or type(node) is ast.Module or not node.args.args:
        return None
    self_name = node.args.args[0].arg
    from_class = [kw for kw in call.keywords if (kw.arg is None or kw.arg == "mode") and type(kw.value) is ast.Attribute
                  and type(kw.value.value) is ast.Name and kw.value.value.id == self_name]
    if not from_class:
        return None
    out = set()
    for cls in scope.module.classes.values():
        mro = list(cls.mro(project))
        if scope.cls not in mro:
            continue
        keywords = [kw for kw in call.keywords if kw not in from_class]
        for kw in from_class:
            value = next((v for c in mro for v in [c.field(kw.value.attr)] if v is not None), None)
            if kw.arg is None and _as_dict(value) is not None:
                keywords += _as_keywords(_as_dict(value))
            elif kw.arg == "mode" and value is not None:
                keywords.append(ast.keyword(arg="mode", value=value))
        if _cudagraph_mode(ast.Call(func=call.func, args=call.args, keywords=keywords), scope):
            out.add(cls.name)
    return frozenset(out)


def _spread_dict(expr, scope: FuncRef, depth: int = 0) -> ast.Dict | None:
    """The dict spread by ``**OPTS``, or by ``**BACKENDS["inductor"]`` / ``**BACKENDS[cfg.get("backend",
    "inductor")]`` / ``**PROFILES[profile]`` with ``profile="cell"`` a default (the entry of a module-level
    dict of dicts that the key, the lookup's default or the parameter's default names); a local name bound
    to one of those; or the ``**compile_kw`` a function forwards, from what its callers pass."""
    if depth > 2:
        return None
    if type(expr) is ast.Name:
        node = scope.node
        if type(node) is not ast.Module and node.args.kwarg is not None and node.args.kwarg.arg == expr.id:
            return _forwarded_keywords(scope)
        for outer in enclosing_functions(scope.module, node):  # ``def register(**kw): def deco(fn): compile(fn, **kw)``
            if outer.args.kwarg is not None and outer.args.kwarg.arg == expr.id:
                return _forwarded_keywords(FuncRef(scope.module, outer, None, outer.name))
        if type(node) is not ast.Module:
            local = bound_values(node.body, expr.id)
            if local and type(local[-1]) is ast.Subscript:
                return _spread_dict(local[-1], scope, depth + 1)
        return _dict_of(expr.id, scope)
    if type(expr) is not ast.Subscript or type(expr.value) is not ast.Name:
        return None
    table = _dict_of(expr.value.id, scope)
    key = expr.slice
    if type(key) is ast.Call and type(key.func) is ast.Attribute and key.func.attr == "get" and len(key.args) == 2:
        key = key.args[1]
    if type(key) is ast.Name:
        key = _constant_of(key.id, scope) or key
    if table is None or type(key) is not ast.Constant:
        return None
    for k, v in zip(table.keys, table.values, strict=True):
        if type(k) is ast.Constant and k.value == key.value:
            return _as_dict(v)
    return None


def _forwarded_keywords(scope: FuncRef) -> ast.Dict | None:
    """The keywords callers of ``scope`` (or of the function enclosing it that returns it, a decorator
    factory: ``@register("score", backend="cudagraphs")``) pass into its ``**kwargs``: those of the first
    caller that passes any, with its own ``**OPTS`` spread out."""
    module = scope.module
    names = {scope.name} | {outer.name for outer in _returning(module, scope.name)}
    for node in ast.walk(module.tree):
        if type(node) is not ast.Call or type(node.func) is not ast.Name or node.func.id not in names:
            continue
        keys, values = [], []
        for kw in node.keywords:
            if kw.arg is not None:
                keys.append(ast.Constant(kw.arg))
                values.append(kw.value)
            else:
                spread = _spread_dict(kw.value, module.body_ref, 2)
                if spread is not None:
                    keys.extend(spread.keys)
                    values.extend(spread.values)
        if keys:
            return ast.Dict(keys=keys, values=values)
    return None


def enclosing_functions(module, node) -> list:
    """The functions around a nested function, innermost first."""
    if type(node) is ast.Module:
        return []
    out = [fref.node for fref in functions_of(module)
           if fref.node is not node and type(fref.node) is not ast.Module
           and fref.node.lineno <= node.lineno <= fref.node.end_lineno and any(n is node for n in ast.walk(fref.node))]
    return sorted(out, key=lambda n: n.lineno, reverse=True)


def decorated_by(module, names: set) -> list:
    """``(function, decorator)`` for each function of the module decorated with one of ``names``, called
    (``@register("score")``) or not (``@deco``)."""
    out = []
    for fref in functions_of(module):
        for dec in getattr(fref.node, "decorator_list", ()):
            parts = dotted(dec.func if type(dec) is ast.Call else dec)
            if parts and parts[-1] in names:
                out.append((fref, dec))
    return out


def _returning(module, name: str) -> list:
    """The module's functions that define a function ``name`` and return it (decorator factories)."""
    out = []
    for fn in module.defs.values():
        if any(type(n) in FUNC_TYPES and n.name == name for n in ast.walk(fn) if n is not fn) and \
                any(type(n) is ast.Return and type(n.value) is ast.Name and n.value.id == name for n in ast.walk(fn)):
            out.append(fn)
    return out


def _field_values(attr: str, scope: FuncRef) -> list:
    """The values the file's classes give a field in their bodies (``mode: str = "max-autotune"`` in a
    dataclass of settings, ``compile_opts = {"mode": ...}`` in a subclass), and those the file passes
    when it builds such an object (``DynamoPlugin(mode="max-autotune")``): the object may be any of them."""
    module = scope.module
    owners = {name for name, cls in module.classes.items() if cls.field(attr) is not None}
    values = [v for cls in module.classes.values() for v in [cls.field(attr)] if v is not None]
    if owners and f"{attr}=" in module.text:
        for node in ast.walk(module.tree):
            if type(node) is ast.Call and type(node.func) is ast.Name and node.func.id in owners:
                values += [kw.value for kw in node.keywords if kw.arg == attr]
    return values


def _as_keywords(options: ast.Dict) -> list[ast.keyword]:
    return [ast.keyword(arg=key.value, value=val) for key, val in zip(options.keys, options.values, strict=True)
            if type(key) is ast.Constant and isinstance(key.value, str)]


def _as_dict(value) -> ast.Dict | None:
    """A dict literal, or ``dict(mode="reduce-overhead", ...)`` read as one."""
    if type(value) is ast.Call and type(value.func) is ast.Name and value.func.id == "dict" and not value.args \
            and all(kw.arg is not None for kw in value.keywords):
        return ast.Dict(keys=[ast.Constant(kw.arg) for kw in value.keywords], values=[kw.value for kw in value.keywords])
    return value if type(value) is ast.Dict else None


def _dict_of(name: str, scope: FuncRef) -> ast.Dict | None:
    """The dict a name is bound to, in ``scope`` or at the module's top level (its last binding): a
    literal, or ``dict(mode="reduce-overhead", ...)`` read as one."""
    bodies = [scope.module.tree.body] + ([scope.node.body] if type(scope.node) is not ast.Module else [])
    values = [v for body in bodies for v in bound_values(body, name)]
    return _as_dict(values[-1]) if values else None


def _constant_of(name: str, scope: FuncRef):
    """The constant a name stands for: a parameter's default, else a module-level assignment."""
    node = scope.node
    if type(node) is not ast.Module:
        args = node.args
        positional = [*args.posonlyargs, *args.args]
        defaults = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults):]], args.defaults, strict=True))
        defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None})
        if name in defaults:
            value = defaults[name]
            return value if type(value) is ast.Constant else None
    for value in bound_values(scope.module.tree.body, name):
        if type(value) is ast.Constant:
            return value
    return None


def _kwarg(call: ast.Call, name: str):
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def _flatten(expr) -> list:
    """The callables of ``(a, b)``, ``[a, b]``, ``tuple(mods)``, ``list(mods)``."""
    if type(expr) in (ast.Tuple, ast.List):
        out = []
        for elt in expr.elts:
            out.extend(_flatten(elt))
        return out
    if type(expr) is ast.Call and type(expr.func) is ast.Name and expr.func.id in ("tuple", "list") and len(expr.args) == 1:
        return _flatten(expr.args[0])
    return [expr]


def _call_attrs(stmt) -> set[str]:
    out = set()
    for node in ast.walk(stmt):
        if type(node) is ast.Call and type(node.func) is ast.Attribute:
            out.add(node.func.attr)
    return out


def _short(node) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001
        return "region"
    return text if len(text) <= 50 else text[:47] + "..."
