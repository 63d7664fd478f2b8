"""The code around a region: what runs between two replays of a capture, or between two calls of a
compiled function, and which Python values it changes.

A graph replays what it recorded; a compiled function guards on the Python values it read. Both go
wrong only when a value *changes* between replays or calls, so the rules that report Python values
(CG404) and kept outputs (CG407) ask this module two questions:

* :func:`around` -- for a manual capture with a span (``with torch.cuda.graph``, ``capture_begin``):
  which lines of the function holding it run after the capture (below it, or in a loop around a
  capture that runs only once);
* :func:`invocations` -- for a compiled region: where the compiled callable is called, and the
  loops around those calls;

and :func:`changes_between` gathers the writes in that code (names, attributes, optimizer
param-group entries), and those of the functions it calls (setters), one level down.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from cgkit.check.callers import call_sites, functions_of, seed_from_callers, source_of
from cgkit.check.facts import facts_of, held_by_self, is_tensor
from cgkit.check.names import bound_values, dotted
from cgkit.check.names import dotted_text as _text
from cgkit.check.project import FUNC_TYPES, ClassIndex, FuncRef

_LOOPS = (ast.For, ast.While, ast.AsyncFor)
_CONDITIONAL = (ast.If, ast.Try, ast.Match) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())
GROUP_KEYS = frozenset(("lr", "weight_decay", "betas", "momentum", "eps", "dampening", "initial_lr"))


# -- after a manual capture ----------------------------------------------------------------------
@dataclass
class Around:
    """What the region rules read of the code around a manual capture (computed once per region)."""

    facts: object  # the facts of the function that holds the capture
    start: int  # the capture's span
    end: int
    rs: int  # the capture statement's lines
    re: int
    loops: list  # (first, last) lines of the loops around it in which the capture runs only once
    stores: dict  # names stored inside the span -> first store
    reads: dict  # names read inside the span before any store there -> first read
    # The other branch of an ``if`` (in no loop) that holds the capture: it never runs after it.
    exclusive: list = field(default_factory=list)

    def later(self, line: int) -> bool:
        """Runs after the capture: below it, or anywhere in a loop that replays what it captured once."""
        if any(lo <= line <= hi for lo, hi in self.exclusive):
            return False
        return line > self.re or any(lo <= line <= hi for lo, hi in self.loops)

    def rebound_later(self, store) -> bool:
        line = store.node.lineno
        return store.name in self.reads and not (self.rs <= line <= self.re) and self.later(line)

    def between_replays(self, line: int) -> bool:
        return self.later(line) and not (self.rs <= line <= self.re)


def around(region, ctx) -> Around | None:
    if region.span is None or region.scope is None:
        return None
    return ctx.memo(("around", id(region)), lambda: _compute_around(region, ctx))


def _compute_around(region, ctx) -> Around:
    sf = facts_of(ctx.project, region.scope)
    start, end = region.span
    stores = {}
    for s in sf.stores:
        if start <= s.node.lineno <= end:
            stores.setdefault(s.name, s)
    reads: dict[str, ast.Name] = {}
    for n in sf.loads:
        if start <= n.lineno <= end and n.id not in reads:
            store = stores.get(n.id)
            if store is None or store.node.lineno > n.lineno:
                reads[n.id] = n
    return Around(sf, start, end, region.stmt.lineno, region.stmt.end_lineno, replay_loops(region), stores, reads,
                  _other_branches(region, sf))


def _other_branches(region, sf) -> list[tuple[int, int]]:
    """The lines of the ``if``/``else`` branches that exclude the capture's own (``if training: capture
    A else: capture B``), for an ``if`` that no loop of the function repeats."""
    out = []
    line = region.stmt.lineno
    for anc in getattr(region, "ancestors", None) or []:
        if type(anc) is not ast.If or not anc.orelse or any(lp.lineno <= anc.lineno <= lp.end_lineno for lp in sf.loops):
            continue
        body, other = (anc.body, anc.orelse) if anc.body[0].lineno <= line <= anc.body[-1].end_lineno else (anc.orelse, anc.body)
        if body[0].lineno <= line <= body[-1].end_lineno:
            out.append((other[0].lineno, other[-1].end_lineno))
    return out


def replay_loops(region) -> list[tuple[int, int]]:
    """Loops around a capture in which it does not run on every iteration (``if step == 0:``
    captures, the other iterations replay). A loop whose body captures on every iteration records a
    new graph each time: what it rebinds before the capture is the next graph's input, not a
    change under an existing graph."""
    out = []
    ancestors = region.ancestors
    for i, anc in enumerate(ancestors):
        if type(anc) in _LOOPS and any(type(inner) in _CONDITIONAL for inner in ancestors[i + 1 :]) and _replays_in(anc):
            out.append((anc.lineno, anc.end_lineno))
    return out


def _replays_in(loop) -> bool:
    """The loop replays a graph (``if step == 0: capture ... else: g.replay()``); a loop that captures
    one graph per size in either branch of an ``if`` records new graphs and replays none."""
    return any(type(n) is ast.Call and type(n.func) is ast.Attribute and n.func.attr == "replay" for n in ast.walk(loop))


# -- calls of a compiled function ----------------------------------------------------------------
@dataclass
class Invocation:
    """One call of a compiled callable: the function that makes it, the call, the loops around it."""

    facts: object
    call: object  # facts.CallSite
    loops: list = field(default_factory=list)  # (first, last) lines of the loops around the call


def invocations(region, ctx) -> list[Invocation]:
    """Where the callable compiled by a ``torch.compile`` region is called (same file)."""
    if region.klass != "compile":
        return []
    return ctx.memo(("invocations", id(region)), lambda: _compute_invocations(region, ctx))


def compiled_names(region) -> list[str]:
    """The expressions the compiled callable is called through: ``model``, ``self.model``, ``step``, and
    what the callers of a builder that returns it bind it to (``model = build("masked", cfg)``)."""
    stmt = region.stmt
    if region.set_as:
        return list(region.set_as)
    if type(stmt) in FUNC_TYPES:  # @torch.compile(...) def step(...)
        return [] if region.roots and region.roots[0].cls is not None else [stmt.name]
    if type(stmt) is ast.Assign and stmt.value is region.node:
        return [_text(t) for t in stmt.targets if _text(t)]
    if type(stmt) is ast.Assign and type(stmt.value) is ast.Tuple and type(stmt.targets[0]) is ast.Tuple \
            and len(stmt.targets[0].elts) == len(stmt.value.elts):  # ``self.loss_fn, self.decode = compile(a), compile(b)``
        return [_text(t) for t, v in zip(stmt.targets[0].elts, stmt.value.elts, strict=True) if v is region.node and _text(t)]
    if type(stmt) is ast.AnnAssign and stmt.value is region.node and _text(stmt.target):
        return [_text(stmt.target)]
    if type(stmt) is ast.Return and stmt.value is region.node:
        return _bound_from_builder(region)
    return []


def _bound_from_builder(region) -> list[str]:
    """``def build(kind, cfg): ... return torch.compile(model, mode=...)``: the names and ``self``
    attributes the file binds a call of ``build`` to (read from the syntax, as the callers' facts are not
    computed yet)."""
    scope = region.scope
    if scope is None or scope.cls is not None or type(scope.node) is ast.Module:
        return []
    out = []
    for node in ast.walk(region.module.tree):
        if type(node) is ast.Assign and type(node.value) is ast.Call and type(node.value.func) is ast.Name \
                and node.value.func.id == scope.name:
            out += [text for text in (_text(t) for t in node.targets) if text and text not in out]
    return out


def kept_in(region, ctx, name: str) -> set[str]:
    """The containers and attributes where the capturing function keeps ``name`` (its graph or an output):
    ``self.graphs[bs] = g`` -> ``self.graphs``; or, for a function that returns it (``return g, out``),
    where its callers keep it (``g, out = self.capture_one(bs)`` then ``self.graphs[bs] = g``)."""
    if region.scope is None:
        return set()
    facts = facts_of(ctx.project, region.scope)
    out = _containers_of(facts, {name})
    returned = returned_positions(region.scope.node, {name}) if type(region.scope.node) is not ast.Module else {}
    if returned:
        for fref, call in call_sites(ctx.project, region.scope.name, region.scope):
            caller = facts_of(ctx.project, fref)
            out |= _containers_of(caller, bound_from(caller, call, returned))
    return out


def _containers_of(facts, names: set[str]) -> set[str]:
    """The containers and attributes that ``names`` are stored in: ``self.graphs[bs] = g`` -> ``self.graphs``,
    ``self.graphs[bs], self.outputs[bs] = g, out`` -> ``self.graphs`` for ``g``."""
    out = set()
    statements = {id(stmt): stmt for _, stmt in facts.item_stores}
    statements.update((id(store.stmt), store.stmt) for store in facts.self_stores)
    for stmt in statements.values():
        if type(stmt) is not ast.Assign:
            continue
        if any(type(t) is ast.Name and t.id in names for t in stmt.targets):  # ``self.graphs[bs] = g = CUDAGraph()``
            out |= {_text(_holder(t)) for t in stmt.targets if _holder(t) is not None} - {None}
            continue
        pairs = [(stmt.targets[0], stmt.value)]
        if type(stmt.targets[0]) is ast.Tuple and type(stmt.value) is ast.Tuple \
                and len(stmt.targets[0].elts) == len(stmt.value.elts):
            pairs = list(zip(stmt.targets[0].elts, stmt.value.elts, strict=True))
        for target, value in pairs:
            held = value.elts if type(value) in (ast.Tuple, ast.List) else [value]  # ``self.io[k] = (static, out)``
            if not any(type(v) is ast.Name and v.id in names for v in held):
                continue
            text = _text(_holder(target)) if _holder(target) is not None else None
            if text:
                out.add(text)
    return out


def _holder(target):
    """``self.graphs[bs]`` -> ``self.graphs``; ``self.out`` -> itself; a plain name holds nothing."""
    return target.value if type(target) is ast.Subscript else target if type(target) is ast.Attribute else None


def returned_positions(fn, names: set[str]) -> dict:
    """{position in the returned tuple (None: the whole value; ``(i, j)`` in a tuple returned inside it): name}
    for the ``names`` a function returns (``return g, out``)."""
    out = {}
    cached = _tuples_cached(fn, names)
    for node in ast.walk(fn):
        if type(node) is ast.Return and node.value is not None:
            value = node.value
            if type(value) is ast.Subscript and _text(_part_of_name(value)) in cached:
                out.update(cached[_text(_part_of_name(value))])  # ``cache[key] = (g, x, out)`` ... ``return cache[key]``
            elif type(value) is ast.Tuple:
                for i, elt in enumerate(value.elts):
                    if type(elt) is ast.Tuple:  # ``return (pse, tae), (pse_g, tae_g), monitor``: position (1, 0)...
                        out.update({(i, j): e.id for j, e in enumerate(elt.elts) if type(e) is ast.Name and e.id in names})
                        continue
                    elt = _part_of_name(elt)  # ``return graphed[0], list(graphed[1:-1]), graphed[-1]``
                    if type(elt) is ast.Name and elt.id in names:
                        out[i] = elt.id
            elif type(_part_of_name(value)) is ast.Name and _part_of_name(value).id in names:  # ``return list(graphed)``
                out[None] = _part_of_name(value).id
    return out


def _tuples_cached(fn, names: set[str]) -> dict:
    """{container: {position: name}} for the tuples of ``names`` a function keeps in a container entry
    (``self.graphs[bs] = (g, static_x, static_out)``): what ``return self.graphs[bs]`` hands back."""
    cached: dict = {}
    for node in ast.walk(fn):
        if type(node) is ast.Assign and type(node.value) is ast.Tuple:
            for target in node.targets:
                if type(target) is ast.Subscript:
                    positions = {i: e.id for i, e in enumerate(node.value.elts) if type(e) is ast.Name and e.id in names}
                    if positions:
                        cached.setdefault(_text(_part_of_name(target)), {}).update(positions)
    return cached


def _part_of_name(expr):
    """``g[0]``, ``g[1:-1]``, ``list(g[1:])``, ``tuple(g)`` -> ``g``: an element, a slice or a copy of a container."""
    if type(expr) is ast.Call and type(expr.func) is ast.Name and expr.func.id in ("list", "tuple") \
            and len(expr.args) == 1 and not expr.keywords:
        expr = expr.args[0]
    while type(expr) is ast.Subscript:
        expr = expr.value
    return expr


def bound_from(facts, call, returned: dict) -> set[str]:
    """The caller's names that receive the returned values (``g, x, y = capture(...)``)."""
    for s in facts.stores:
        stmt = s.node
        if type(stmt) is ast.Assign and stmt.value is call:
            target = stmt.targets[0]
            if type(target) is ast.Tuple:
                nested = {u.id for i, t in enumerate(target.elts) if type(t) is ast.Tuple
                          for j, u in enumerate(t.elts) if (i, j) in returned and type(u) is ast.Name}
                return nested | {t.id for i, t in enumerate(target.elts) if i in returned and type(t) is ast.Name}
            if type(target) is ast.Name and None in returned:
                return {target.id}
    return set()


def _replayed(expr) -> str | None:
    """``self.graphs[n]`` -> ``self.graphs``; ``g`` -> ``g``."""
    while type(expr) is ast.Subscript:
        expr = expr.value
    return _text(expr)


def _compute_invocations(region, ctx) -> list[Invocation]:
    names = compiled_names(region)
    if not names:
        return []
    module = region.module
    project = ctx.project
    # ``m.forward = torch.compile(m.forward)``: calling ``m`` runs it
    names += [n[: -len(".forward")] for n in names if n.endswith(".forward")]
    names += _held_by_constructed(region, names)
    names += _held_compiling_objects(region, names)
    out = []
    for fref in _functions_mentioning(module, names, region):
        if _other_class_options(region, fref, project):
            continue
        seed_from_callers(fref, project)  # ``generate(model, ...)`` calls it: model's kind from main
        facts = facts_of(project, fref)
        local = set(names) | _aliases_of(facts, names)
        for call in facts.calls:
            if _text(call.node.func) in local and call.node is not region.node:
                line = call.node.lineno
                loops = [(lp.lineno, lp.end_lineno) for lp in facts.loops if lp.lineno <= line <= lp.end_lineno]
                out.append(Invocation(facts, call, loops))
    return out


def _other_class_options(region, fref, project) -> bool:
    """A method of a subclass whose own compile options leave CUDA graphs off (``compile_kwargs =
    {"mode": "max-autotune-no-cudagraphs"}``) calls the compiled object without graphs."""
    graphed = region.graphed_classes
    if graphed is None or fref.cls is None or region.scope is None or region.scope.cls is None:
        return False
    return region.scope.cls in fref.cls.mro(project) and fref.cls.name not in graphed


def _held_by_constructed(region, names: list[str]) -> list[str]:
    """``Trainer(model, ...)`` with the compiled ``model``, whose ``__init__`` keeps it as ``self.model``:
    ``self.model``, as the trainer's methods call it (classes of the same file). Read from the syntax
    alone: computing facts here would fix functions' kinds before their callers seed them."""
    out = []
    module = region.module
    plain = {n for n in names if n.isidentifier()}
    if not plain:
        return out
    for call in ast.walk(module.tree):
        if type(call) is not ast.Call or type(call.func) is not ast.Name:
            continue
        cls = module.classes.get(call.func.id)
        init = cls.methods.get("__init__") if cls is not None else None
        if init is None:
            continue
        params = [a.arg for a in init.args.args][1:]
        passed = {params[i] for i, a in enumerate(call.args) if i < len(params) and type(a) is ast.Name and a.id in plain}
        passed |= {kw.arg for kw in call.keywords if type(kw.value) is ast.Name and kw.value.id in plain}
        if passed:
            self_name = init.args.args[0].arg if init.args.args else "self"
            out += [f"self.{attr}" for attr in _attrs_bound_to(init, self_name, passed)]
    return out


def _held_compiling_objects(region, names: list[str]) -> list[str]:
    """``Reranker(Pipeline(...))`` (or ``p = Pipeline(); Reranker(p)``), where ``Pipeline`` keeps the compiled
    function as ``self.score`` and ``Reranker.__init__`` keeps its argument as ``self.p``: the reranker's
    methods call it as ``self.p.score``. Read from the syntax alone, like :func:`_held_by_constructed`."""
    scope = region.scope
    attrs = [n[len("self."):] for n in names if n.startswith("self.") and n.count(".") == 1]
    if scope is None or scope.cls is None or not attrs:
        return []
    module, owner = region.module, scope.cls.name
    built = {t.id for node in ast.walk(module.tree) if type(node) is ast.Assign and type(node.value) is ast.Call
             and type(node.value.func) is ast.Name and node.value.func.id == owner for t in node.targets if type(t) is ast.Name}
    out = []
    for call in ast.walk(module.tree):
        if type(call) is not ast.Call or type(call.func) is not ast.Name or call.func.id == owner:
            continue
        holder = module.classes.get(call.func.id)
        init = holder.methods.get("__init__") if holder is not None else None
        if init is None:
            continue

        def instance(arg) -> bool:
            return (type(arg) is ast.Call and type(arg.func) is ast.Name and arg.func.id == owner) or \
                (type(arg) is ast.Name and arg.id in built)
        params = [a.arg for a in init.args.args][1:]
        passed = {params[i] for i, a in enumerate(call.args) if i < len(params) and instance(a)}
        passed |= {kw.arg for kw in call.keywords if instance(kw.value)}
        if passed:
            self_name = init.args.args[0].arg if init.args.args else "self"
            out += [f"self.{held}.{attr}" for held in _attrs_bound_to(init, self_name, passed) for attr in attrs]
    return out


def _attrs_bound_to(init, self_name: str, params: set[str]) -> set[str]:
    """Attributes ``__init__`` binds straight to one of ``params`` (``self.model = model``, or in a tuple)."""
    out = set()
    for stmt in ast.walk(init):
        if type(stmt) is not ast.Assign or len(stmt.targets) != 1:
            continue
        target, value = stmt.targets[0], stmt.value
        if type(target) is ast.Tuple and type(value) is ast.Tuple and len(target.elts) == len(value.elts):
            pairs = zip(target.elts, value.elts, strict=True)
        else:
            pairs = [(target, value)]
        for t, v in pairs:
            if type(t) is ast.Attribute and type(t.value) is ast.Name and t.value.id == self_name \
                    and type(v) is ast.Name and v.id in params:
                out.add(t.attr)
    return out


def _aliases_of(facts, names) -> set[str]:
    """Local names bound to the compiled callable: ``fn = step_debug if debug else step``."""
    out = set()
    for s in facts.stores:
        value = getattr(s.node, "value", None)
        if type(s.node) is ast.Assign and value is not None and type(value) in (ast.Name, ast.Attribute, ast.IfExp):
            parts = [value] if type(value) is not ast.IfExp else [value.body, value.orelse]
            if any(_text(p) in names for p in parts):
                out.add(s.name)
    return out


def _functions_mentioning(module, names: list[str], region) -> list[FuncRef]:
    """The module's code (top level, functions, methods) whose text mentions one of ``names``."""
    words = {n.rsplit(".", 1)[-1] for n in names}
    out = [module.body_ref]
    lines = module.lines
    roots = {root.key for root in region.roots}  # the compiled code itself: not a caller (and its
    # facts must wait for the argument kinds its callers pass)

    def mentions(node) -> bool:
        if id(node) in roots:
            return False
        text = "\n".join(lines[node.lineno - 1 : node.end_lineno])
        return any(w in text for w in words)

    for name, node in module.defs.items():
        if mentions(node):
            out.append(FuncRef(module, node, None, name))
    for cls in module.classes.values():
        for name, node in cls.methods.items():
            if mentions(node):
                out.append(FuncRef(module, node, cls, name))
    return out


# -- what changes between replays or calls -------------------------------------------------------
@dataclass
class Change:
    """A write between replays/calls: where, and (for attributes) the class of the object."""

    module: object
    node: object
    cls: ClassIndex | None = None
    via: object = None  # the call between replays that made the write, when it was made in a callee
    literal: bool = False  # the value written is a Python number, flag or string by its own evidence


def changes_between(region, ctx) -> dict[tuple, list[Change]]:
    """Writes that run between two replays (manual) or two calls (compiled) of the region, by key:
    ``("local", scope key, name)``, ``("global", path, name)``, ``("attr", name)`` (with the class in
    the Change), ``("group", key)`` for optimizer param-group entries (``"lr"``...) and
    ``("scheduler",)`` for learning-rate scheduler steps."""
    return ctx.memo(("changes", id(region)), lambda: _compute_changes(region, ctx))


def _compute_changes(region, ctx) -> dict:
    out: dict[tuple, list[Change]] = {}
    project = ctx.project
    graphed = frozenset(root.key for root in region.roots)
    if region.klass == "compile":
        for inv in invocations(region, ctx):
            if inv.loops:
                loops = inv.loops
                called = {_text(inv.call.node.func)} - {None}  # ``model.horizon = h; model(x)``: its object
                _writes(inv.facts, lambda line, loops=loops: any(lo <= line <= hi for lo, hi in loops), ctx, out,
                        compiled_objects=called, graphed=graphed)
        _setters_in_loops(region, ctx, out)
        for facts in {id(inv.facts): inv.facts for inv in invocations(region, ctx)}.values():
            _per_call_writes(facts, ctx, out)
            _writes_in_callers_loops(facts, region, ctx, out)
        _runtime_setters(region, ctx, out)
        return out
    if region.scope is None:
        return out
    near = around(region, ctx)
    if near is not None:
        _writes(near.facts, near.between_replays, ctx, out)
    else:  # make_graphed_callables: the graphed callables run below the graphing call
        end = region.stmt.end_lineno
        names = {_text(t) for t in region.targets} | set(compiled_names(region))  # ``enc, head = mgc((enc, head), ...)``
        _writes(facts_of(project, region.scope), lambda line: line > end, ctx, out,
                compiled_objects=frozenset(names - {None}), graphed=graphed)
    for passed in region.passed:  # a capture helper: its callers run on after it returns the graph
        end = passed.call.end_lineno
        _writes(facts_of(project, passed.caller), lambda line, end=end: line > end, ctx, out)
        if passed.helper.startswith("@"):  # a capturing decorator: each later call of the function replays
            for fref, call in call_sites(project, passed.target.name, passed.target):
                cf = facts_of(project, fref)
                _writes(cf, _after_first_call(cf, call), ctx, out, recapture=passed.target)
    rs, re_ = region.stmt.lineno, region.stmt.end_lineno
    for facts, loops in replay_sites(region, ctx):  # a runner: the code that runs between its replays
        same = region.scope is not None and facts.fref.key == region.scope.key

        def between(line, loops=loops, same=same):
            return any(lo <= line <= hi for lo, hi in loops) and not (same and rs <= line <= re_)

        _writes(facts, between, ctx, out, recapture=region.scope)
    for facts, _loops in replay_sites(region, ctx):
        if facts.cls is not None and not (region.scope is not None and facts.fref.key == region.scope.key):
            _per_call_writes(facts, ctx, out)
    for facts, loops in _replay_method_callers(region, ctx):  # ``for ...: runner.step()`` two calls away
        _writes(facts, lambda line, loops=loops: any(lo <= line <= hi for lo, hi in loops), ctx, out,
                recapture=region.scope)
    _runtime_setters(region, ctx, out)
    return out


def _after_first_call(facts, call):
    """Which lines of a caller run between two calls of a replaying function: any line of a function (it
    may be called again), but in the script's own code, which runs once, only the lines below the call
    and the loops around it (``RANGE = 350.0`` at the top of the file is its first value, not a change)."""
    if type(facts.fref.node) is not ast.Module:
        return lambda line: True
    loops = [(lp.lineno, lp.end_lineno) for lp in facts.loops if lp.lineno <= call.lineno <= lp.end_lineno]
    start = min([call.lineno] + [lo for lo, _hi in loops])
    return lambda line: line >= start


# Methods that build or restore an object: what they set is its starting state, not a change.
CONSTRUCTION = frozenset(("__init__", "__post_init__", "__new__", "__setstate__", "load_state_dict", "reset_parameters"))


def _runtime_setters(region, ctx, out: dict) -> None:
    """Attributes the region reads, set by code of its file that runs while the graph (or the compiled
    function) is in use: a setter method (``def set_quality(self, n): self.iters = n``), a callback
    (``trainer.smoothing = ...``), a calibration (``model.threshold = t``), a curriculum step
    (``self.enc.active_levels += 1``); which code that is, :func:`lines_after_capture` says. Not
    counted: an object such code builds and sets up itself (:func:`configured_here`)."""
    project = ctx.project
    reads = reads_in_region(region, ctx)
    attrs = {read.key[1] for read in reads if read.key[0] == "attr"}
    entries = {read.key for read in reads if read.key[0] == "global_item" and read.key[1] == region.module.path}
    held_dicts = {read.key[1] for read in reads if read.key[0] == "self_item"}  # ``self.cfg`` of ``self.cfg["r"]``
    steps = region.klass == "manual" and bool(optimizer_steps(region))  # a captured optimizer step
    # The functions that replay judge their own writes (those between two replays) elsewhere.
    replaying = {f.fref.key for f, _loops in [*replay_sites(region, ctx), *_replay_method_callers(region, ctx)]} \
        if steps else set()
    if not attrs and not entries and not steps and not held_dicts:
        return
    dicts = {key[2] for key in entries}
    # In a function that calls the compiled code in a loop, what it sets after the last such loop precedes no
    # call of it there (``self.verbose = False`` after the training loop).
    last_call: dict = {}
    for inv in invocations(region, ctx) if region.klass == "compile" else ():
        if inv.loops:
            key = inv.facts.fref.key
            last_call[key] = max(last_call.get(key, 0), max(hi for _lo, hi in inv.loops))
    for fref in functions_of(region.module):
        text = source_of(fref)
        if not assigns_attribute(text, attrs) and not any(f"{name}[" in text or f"{name}.update(" in text for name in dicts) and \
                not (steps and "param_groups" in text) and not any(f".{name}[" in text for name in held_dicts):
            continue
        after = lines_after_capture(fref, region, ctx)
        if after is None:
            continue
        until = last_call.get(fref.key, 1 << 30)

        def runs_between(line, after=after, until=until) -> bool:
            return after < line <= until

        facts = facts_of(project, fref)
        for target, stmt in facts.item_stores:  # ``PACK_CFG["pad_to_multiple_of"] = 128`` in ``set_epoch``
            entry = global_entry(facts, target) if runs_between(stmt.lineno) else None
            key = ("global_item", facts.module.path, *entry) if entry is not None else None
            if key in entries:
                out.setdefault(key, []).append(Change(facts.module, stmt, literal=_literal_store(facts, stmt)))
            group = group_key(facts, target) if steps and runs_between(stmt.lineno) and fref.key not in replaying else None
            if group is not None:  # ``def decay(self): for g in self.opt.param_groups: g["lr"] *= 0.5``
                out.setdefault(("group", group), []).append(Change(facts.module, stmt))
            written = entry_written(target) if runs_between(stmt.lineno) else None
            if written is not None and written[0] in held_dicts:  # ``self.params[name] = value`` in a setter
                out.setdefault(("self_item", *written), []).append(
                    Change(facts.module, stmt, facts.cls if _on_self(facts, target) else None,
                           literal=_literal_store(facts, stmt)))
        for c in facts.calls:  # ``WORLD.update(seed=seed, octaves=octaves)`` in a UI callback: every entry read may change
            owner = c.node.func.value if c.meth == "update" else None
            if type(owner) is ast.Name and owner.id in dicts and owner.id not in facts.params \
                    and not any(st.name == owner.id for st in facts.stores) and runs_between(c.node.lineno):
                for key in entries:
                    if key[2] == owner.id:
                        out.setdefault(key, []).append(Change(facts.module, c.node))
        for owner, attr, stmt in [*facts.attr_stores, *facts.held_stores, *((None, st.attr, st.stmt) for st in facts.self_stores)]:
            if attr in held_dicts and runs_between(stmt.lineno) and _settings_dict(facts, getattr(stmt, "value", None)):
                # ``worker.cfg = json.load(open(path))``: every entry may change
                cls = facts.cls if owner is None else None
                out.setdefault(("self_item", attr, None), []).append(Change(facts.module, stmt, cls, literal=True))
        for store in facts.self_stores if facts.cls is not None else ():
            if store.attr in attrs and runs_between(store.stmt.lineno) and not is_tensor(store.kind) \
                    and type(store.kind) is not tuple and not _initial_constant(facts.cls, store, project):
                out.setdefault(("attr", store.attr), []).append(
                    Change(facts.module, store.stmt, facts.cls, literal=_literal_store(facts, store.stmt, store.attr)))
        for owner, attr, stmt in [*facts.attr_stores, *facts.held_stores]:
            if not runs_between(stmt.lineno) or configured_here(facts, owner, stmt, region) or _autograd_context(facts, owner):
                continue
            if attr in attrs and _python_value(facts, stmt):
                cls = (instance_class(facts, facts.infer(owner)) or _isinstance_class(facts, owner, stmt)) \
                    if type(owner) is ast.Name else None
                out.setdefault(("attr", attr), []).append(Change(facts.module, stmt, cls, literal=_literal_store(facts, stmt)))


def _autograd_context(facts, owner) -> bool:
    """``ctx`` of a custom autograd function's ``forward``/``backward``: a new object for each call, whose
    attributes (``ctx.p = p``) are no setting of anything the graph reads."""
    node = facts.fref.node
    return type(owner) is ast.Name and facts.cls is not None and facts.fref.name in ("forward", "backward", "setup_context") \
        and bool(node.args.args) and owner.id == node.args.args[0].arg \
        and any(getattr(d, "id", None) == "staticmethod" for d in node.decorator_list)


def assigns_attribute(text: str, attrs) -> bool:
    """The code's text assigns one of ``attrs`` on some object (``.iters = ``, ``.gain *= ``): a cheap
    test before its facts and its callers are looked at."""
    if not attrs:
        return False
    pattern = re.compile(r"\.(?:" + "|".join(re.escape(a) for a in attrs) + r")\s*(?:[-+*/%@&|^]|//|\*\*)?=(?!=)")
    return pattern.search(text) is not None


def _below_capture_calls(facts, region) -> int | None:
    """The line below which a function runs after the region is captured: 0 when it does not capture,
    the last line that calls the capture otherwise, None when a loop in it captures again each time."""
    scope = region.scope
    if scope is None or facts.fref.key == scope.key:
        return None if scope is not None else 0
    names = {scope.name} | _capturing_constructors(region)
    calls = [c.node for c in facts.calls if c.meth == scope.name or (type(c.node.func) is ast.Name and c.node.func.id in names)]
    if not calls:
        return 0
    if any(lp.lineno <= call.lineno <= lp.end_lineno for call in calls for lp in facts.loops):
        return None
    if type(facts.fref.node) is not ast.Module and all(_under_if(facts.fref.node, call) for call in calls):
        return 0  # ``if key not in GRAPHS: _capture(h, w)`` then replay: every later call runs all of it
    return max(call.end_lineno for call in calls)


def _under_if(fn, call) -> bool:
    return any(type(n) is ast.If and n.lineno < call.lineno <= n.end_lineno for n in ast.walk(fn))


def _first_use(facts, region, after: int) -> int:
    """``live = Service()`` (whose constructor compiles) at ``after``, then ``live.running.factor = 1.15``
    and ``live.predict(x)``: nothing is recorded before the first call, so the lines above the first use of
    ``live`` set its starting state. The line before that use (``after`` when there is none to find)."""
    classes = _capturing_constructors(region)
    built = {s.name for s in facts.stores if type(s.node) is ast.Assign and type(s.node.value) is ast.Call
             and type(s.node.value.func) is ast.Name and s.node.value.func.id in classes}
    # ``model.forward = torch.compile(model.forward)`` at the top: ``model``, and the script's functions
    # that call it (``session(stream)``)
    compiled = {n.split(".")[0] for n in compiled_names(region)} & {s.name for s in facts.stores}
    callers_of = {name for name, node in region.module.defs.items()
                  if any(type(n) is ast.Call and _called_on(n.func) in compiled for n in ast.walk(node))}
    uses = [c.node.lineno for c in facts.calls if c.node.lineno > after and (
        _called_on(c.node.func) in built | compiled or (type(c.node.func) is ast.Name and c.node.func.id in callers_of))]
    if not uses:
        return after
    first = min(uses)  # in a loop, the loop's own lines run again after it
    return min([first] + [lp.lineno for lp in facts.loops if lp.lineno <= first <= lp.end_lineno]) - 1


def _called_on(func) -> str | None:
    """``live`` for ``live(x)`` and ``live.predict(x)`` (not for ``live.pricer.parameters()``)."""
    if type(func) is ast.Attribute:
        func = func.value
    return func.id if type(func) is ast.Name else None


def _capturing_constructors(region) -> set[str]:
    """The classes of the file whose construction captures: ``EraserRunner(model)`` when its
    ``__init__`` is the capturing function or calls it on ``self``."""
    scope = region.scope
    cls = scope.cls if scope is not None else None
    if cls is None:
        return set()
    init = cls.methods.get("__init__")
    if init is None:
        return set()
    if init is not scope.node and not any(
            type(n) is ast.Call and type(n.func) is ast.Attribute and n.func.attr == scope.name
            and type(n.func.value) is ast.Name and init.args.args and n.func.value.id == init.args.args[0].arg
            for n in ast.walk(init)):
        return set()
    return {cls.name}


def configured_here(facts, owner, stmt, region) -> bool:
    """``q = factory(); q.internal = flag`` or ``recipe = copy.deepcopy(recipe); recipe.x = ...``: the
    function sets up an object it built itself, not the one the graph holds. A loop's variable
    (``for blk in model.blocks``: the model's parts) and what the capture returned (``embed, g = build()``)
    are the graph's own."""
    if type(owner) is not ast.Name or _handed_to_compiled(facts, owner.id, stmt, region) \
            or _runner_used_in_loop(facts, owner.id, stmt, region) or _handed_to_runner(facts, owner.id, stmt, region) \
            or _handed_to_capture(facts, owner.id, stmt, region):
        return False
    local = {s.name for s in facts.stores if s.name == owner.id and not s.loop_target and not _returned_by_capture(s, region)}
    return (owner.id in local and owner.id not in facts.params) or _built_here(facts, owner.id, stmt, region)


def _runner_used_in_loop(facts, name: str, stmt, region) -> bool:
    """``smoothed = Smooth(...)``, then ``for sigma in grid: smoothed.sigma = sigma; smoothed.certify(x)``:
    the object is an instance of the class that captures, and the loop that sets it also calls it (so it
    replays, or captures once and replays, between two of these stores)."""
    scope = region.scope
    if region.klass != "manual" or scope is None or scope.cls is None:
        return False
    kind = facts.kind_of_name(name, (stmt.lineno, stmt.col_offset))
    if type(kind) is not tuple or kind[0] != "inst" or scope.cls not in kind[1].mro(facts.project):
        return False
    loops = [lp for lp in facts.loops if lp.lineno <= stmt.lineno <= lp.end_lineno]
    return any(type(c.node.func) is ast.Attribute and type(c.node.func.value) is ast.Name and c.node.func.value.id == name
               and any(lp.lineno <= c.node.lineno <= lp.end_lineno for lp in loops) for c in facts.calls)


def _handed_to_capture(facts, name: str, stmt, region) -> bool:
    """``stem_g, ... = graph_model(cfg, stem, ...)`` (the function that captures or graphs), then, in a loop
    below, ``stem.mq_scale = ...``: the object the graph was made from, changed while the graph is in use."""
    scope = region.scope
    if region.klass != "manual" or scope is None or type(scope.node) is ast.Module or scope.name == "__init__":
        return False
    if not any(lp.lineno <= stmt.lineno <= lp.end_lineno for lp in facts.loops):
        return False
    return any(c.node.lineno < stmt.lineno and (c.meth == scope.name or (type(c.node.func) is ast.Name
                                                                         and c.node.func.id == scope.name))
               and any(type(a) is ast.Name and a.id == name for a in [*c.node.args, *(k.value for k in c.node.keywords)])
               for c in facts.calls)


def _handed_to_runner(facts, name: str, stmt, region) -> bool:
    """``cfg = PoolConfig(); trainer = Trainer(cfg)``, then ``for epoch ...: cfg.weight = ...`` in a loop
    that also calls ``trainer.step(...)``: the object was handed to the class that captures (or compiles),
    which keeps it, and the loop that changes it runs the graph between two of these stores."""
    scope = region.scope
    if scope is None or scope.cls is None:
        return _handed_to_compiled_model(facts, name, stmt, region)
    loops = [lp for lp in facts.loops if lp.lineno <= stmt.lineno <= lp.end_lineno]
    for store in facts.stores if loops else ():
        value = getattr(store.node, "value", None)
        if store.node.lineno >= stmt.lineno or type(value) is not ast.Call:
            continue
        # ``Trainer(cfg)``, or ``Reranker(Pipeline(names, cfg))``: the capturing class built with it
        kinds = [facts.infer(c) for c in _calls_given(value, name)]
        if any(type(k) is tuple and k[0] == "inst" and scope.cls in k[1].mro(facts.project) for k in kinds) and any(
                type(c.node.func) is ast.Attribute and type(c.node.func.value) is ast.Name
                and c.node.func.value.id == store.name and any(lp.lineno <= c.node.lineno <= lp.end_lineno for lp in loops)
                for c in facts.calls):
            return True
    return False


def _calls_given(value, name: str) -> list[ast.Call]:
    """The calls in ``value`` that are handed the name ``name`` as an argument."""
    return [c for c in ast.walk(value) if type(c) is ast.Call and any(
        type(a) is ast.Name and a.id == name for a in [*c.args, *(k.value for k in c.keywords)])]


def _handed_to_compiled_model(facts, name: str, stmt, region) -> bool:
    """The script's own code: ``model = AstroNet(view, detrend)`` then ``model.forward = torch.compile(...)``;
    ``detrend.sigma_clip = 4.0`` below, once the compiled model has run (which lines run while it is in use,
    :func:`lines_after_capture` says): the object the compiled model was built with."""
    if region.klass != "compile" or type(facts.fref.node) is not ast.Module:
        return False
    classes = {root.cls for root in region.roots if root.cls is not None}
    for store in facts.stores:
        value = getattr(store.node, "value", None)
        if store.node.lineno >= stmt.lineno or type(value) is not ast.Call:
            continue
        for c in _calls_given(value, name):
            kind = facts.infer(c)
            if type(kind) is tuple and kind[0] == "inst" and any(cls in kind[1].mro(facts.project) for cls in classes):
                return True
    return False


def _handed_to_compiled(facts, name: str, stmt, region) -> bool:
    """``loss = train_step(model, x, y)`` in the loop that sets ``model.W_E`` (or above the store): the
    object is given to the compiled function, which has run with it before the store."""
    if region.klass != "compile":
        return False
    called = set(compiled_names(region))
    for c in facts.calls:
        node = c.node
        if _text(node.func) not in called or not any(type(a) is ast.Name and a.id == name for a in node.args):
            continue
        if node.lineno < stmt.lineno or any(lp.lineno <= stmt.lineno <= lp.end_lineno and lp.lineno <= node.lineno <= lp.end_lineno
                                            for lp in facts.loops):
            return True
    return False


def _built_here(facts, name: str, stmt, region) -> bool:
    """``recipe = copy.deepcopy(recipe)`` (or any call) is the name's last binding before ``stmt``: the
    object set up here is a new one, not the one the graph holds."""
    bound = [s for s in facts.stores if s.name == name and s.node.lineno < stmt.lineno and not s.loop_target]
    last = bound[-1] if bound else None
    return last is not None and type(getattr(last.node, "value", None)) is ast.Call and not _returned_by_capture(last, region)


def _returned_by_capture(store, region) -> bool:
    """``embed, g_embed = build()`` where ``build`` captures: the name holds what the capture used."""
    value = getattr(store.node, "value", None)
    scope = region.scope
    return scope is not None and type(value) is ast.Call and (
        (type(value.func) is ast.Name and value.func.id in {scope.name} | _capturing_constructors(region))
        or (type(value.func) is ast.Attribute and value.func.attr == scope.name))


def _initial_constant(cls, store, project) -> bool:
    """``self.penalty = 1.0`` where ``__init__`` set the same constant: no change."""
    value = _element_for(store.stmt, store.attr)
    if type(value) is not ast.Constant:
        return False
    for klass in cls.mro(project):
        init = klass.methods.get("__init__")
        if init is not None:
            for first in facts_of(project, FuncRef(klass.module, init, klass, "__init__")).self_stores:
                if first.attr == store.attr:
                    initial = _element_for(first.stmt, first.attr)
                    return type(initial) is ast.Constant and initial.value == value.value
    return False


def lines_after_capture(fref, region, ctx) -> int | None:
    """Where a function of the region's file runs while the graph (or the compiled function) is in use:
    below this line (0: all of it), or None when it does not. Not counted: the region's own code,
    construction, a function that captures (or compiles) itself, one whose loop calls the capture again,
    and one that nothing calls at run time. Counted: a function that calls the capture once and goes on
    (``train()`` calling ``build()``, below that call); one that something calls outside construction
    (a caller that captures or compiles calls it at run time only below that); a public function nothing
    in view calls (``train()``, ``anneal()``: an entry point for other code)."""
    return ctx.memo(("after capture", fref.key, id(region)), lambda: _lines_after_capture(fref, region, ctx))


def _lines_after_capture(fref, region, ctx) -> int | None:
    reached = {facts.fref.key for facts, _span, _chain in region.reached}
    setup = {r.scope.key: r.stmt.end_lineno for r in ctx.regions if r.scope is not None}
    if fref.key in reached or fref.name in CONSTRUCTION:
        return None
    if fref.key in setup:
        if region.klass != "compile" or any(r.klass != "compile" for r in ctx.regions
                                              if r.scope is not None and r.scope.key == fref.key):
            return None
        # ``opt_step = torch.compile(opt.step)`` then a training loop calling ``train_step``: compiling is
        # lazy, so below that line the function runs while the compiled code is in use (at the top of a
        # script, from the first use of what was compiled)
        if type(fref.node) is ast.Module:
            return _first_use(facts_of(ctx.project, fref), region, setup[fref.key])
        return setup[fref.key]
    after = _below_capture_calls(facts_of(ctx.project, fref), region)
    if after is None:
        return None
    if type(fref.node) is ast.Module:  # the script's own code: only below the line that captures
        if after and region.klass == "compile":  # compiled lazily: from the first use of what it built
            after = _first_use(facts_of(ctx.project, fref), region, after)
        return after or None
    callers = list(call_sites(ctx.project, fref.name, fref))
    if not callers:
        return None if fref.name.startswith("_") else after
    if any(c.name not in CONSTRUCTION and (c.key not in setup or call.lineno > setup[c.key]) for c, call in callers):
        return after
    return None


def _per_call_writes(facts, ctx, out: dict) -> None:
    """A function that replays the graph or calls the compiled function, and stores a value taken from
    its own parameters (``def generate(self, ..., length_penalty=1.0): self.length_penalty =
    length_penalty``): every call may bring another value, so the store runs between two replays."""
    if type(facts.fref.node) is ast.Module or not facts.params:
        return
    params = set(facts.params)
    found: dict[tuple, list[Change]] = {}
    # Its own stores only: reading its callees here would compute their facts before the region's walk
    # seeds their parameters with the kinds of the arguments.
    _writes(facts, lambda line: True, ctx, found, callees=False)
    for key, changes in found.items():
        if key[0] not in ("attr", "global"):
            continue
        fed = [c for c in changes if c.via is None and _reads_any(getattr(c.node, "value", None), params)]
        for change in fed:
            if change not in out.get(key, []):
                out.setdefault(key, []).append(change)


def _isinstance_class(facts, owner: ast.Name, stmt) -> ClassIndex | None:
    """The file's class ``C`` of an ``if isinstance(owner, C):`` around ``stmt``."""
    for node in ast.walk(facts.fref.node):
        if type(node) is ast.If and node.lineno < stmt.lineno <= node.end_lineno and type(node.test) is ast.Call \
                and type(node.test.func) is ast.Name and node.test.func.id == "isinstance" and len(node.test.args) == 2:
            subject, klass = node.test.args
            if type(subject) is ast.Name and subject.id == owner.id and type(klass) is ast.Name:
                found = facts.module.classes.get(klass.id)
                if found is not None:
                    return found
    return None


_MODULE_WALKS = frozenset(("modules", "children", "named_modules", "named_children"))


def _module_part(facts, owner: ast.Name, stmt) -> bool:
    """``for m in model.modules(): m.observe = False``: a part of a model the code holds."""
    for s in facts.stores:
        if s.name == owner.id and s.loop_target and s.node.lineno <= stmt.lineno <= s.node.end_lineno:
            it = getattr(s.node, "iter", None)
            return type(it) is ast.Call and type(it.func) is ast.Attribute and it.func.attr in _MODULE_WALKS
    return False


def _reads_any(node, names: set[str]) -> bool:
    return node is not None and any(type(n) is ast.Name and n.id in names for n in ast.walk(node))


def _replay_method_callers(region, ctx) -> list:
    """Loops that call a runner's replaying method (``graphed()`` for a ``__call__`` that replays,
    ``runner.run(x)``): what they set runs between two replays. A method of the runner that calls it
    (``calibrate()`` setting a flag, then calling ``self.serve(b)``) and does not capture runs after the
    capture, all of it. ``[(facts, [(first, last), ...])]``."""
    methods = {(facts.cls, facts.fref.name) for facts, _ in replay_sites(region, ctx)
               if facts.cls is not None and facts.fref.name in facts.cls.methods}
    if not methods:
        return []
    # Only functions whose text can call one of them: ``.serve(``, or the class's name for ``graphed()``.
    needles = {f".{name}(" for _cls, name in methods if name != "__call__"}
    needles |= {f"{cls.name}(" for cls, name in methods if name == "__call__"}
    out = []
    for fref in functions_of(region.module):
        text = source_of(fref)
        if not any(needle in text for needle in needles):
            continue
        facts = facts_of(ctx.project, fref)
        loops = []
        for c in facts.calls:
            func = c.node.func
            owner = facts.kind_of_name(func.id) if type(func) is ast.Name else c.recv if c.meth else None
            name = "__call__" if type(func) is ast.Name else c.meth
            cls = owner[1] if type(owner) is tuple and len(owner) > 1 and owner[0] == "inst" else None
            if cls is None and type(func) is ast.Attribute and type(func.value) is ast.Name and func.value.id == facts.self_name:
                cls = facts.cls  # ``self.serve(b)`` in another method of the runner
                if (cls, name) in methods and not _captures_again(facts, region):
                    loops.append((fref.node.lineno, fref.node.end_lineno))
            if cls is not None and (cls, name) in methods:
                loops += [(lp.lineno, lp.end_lineno) for lp in facts.loops if lp.lineno <= c.node.lineno <= lp.end_lineno]
        if loops:
            out.append((facts, loops))
    return out


def _captures_again(facts, region) -> bool:
    """The function holds the capture, or calls the function that holds it."""
    scope = region.scope
    if scope is None or facts.fref.key == scope.key:
        return True
    return any(c.meth == scope.name or (type(c.node.func) is ast.Name and c.node.func.id == scope.name) for c in facts.calls)


def replay_sites(region, ctx) -> list:
    """Functions of the region's file that replay its graph (``self.graph.replay()`` in a runner's
    method, ``g.replay()``, ``self.graphs[bs].replay()``), with the lines that run between two replays:
    the loops around each replay, or, for a replay outside any loop, the whole function (it runs once per
    replay): ``[(facts, [(first, last), ...])]``."""
    if region.graph_expr is None or region.span is None:
        return []
    return ctx.memo(("replays", id(region)), lambda: _compute_replay_sites(region, ctx))


def _compute_replay_sites(region, ctx) -> list:
    graph = _text(region.graph_expr)
    if graph is None:
        return []
    names = {graph} | kept_in(region, ctx, graph)  # ``self.graphs[bs] = g``: replayed as self.graphs[n]
    out = []
    for fref in functions_of(region.module):
        node = fref.node
        text = source_of(fref)
        if ".replay(" not in text or not any(n.rsplit(".", 1)[-1] in text for n in names):
            continue
        if any(n.startswith("self.") for n in names) and fref.cls is not (region.scope.cls if region.scope else None) \
                and not graph.isidentifier():
            continue
        facts = facts_of(ctx.project, fref)
        loops = []
        for c in facts.calls:
            if c.meth == "replay" and _replayed(c.node.func.value) in names:
                line = c.node.lineno
                around_it = [(lp.lineno, lp.end_lineno) for lp in facts.loops if lp.lineno <= line <= lp.end_lineno]
                if around_it:
                    loops.extend(around_it)
                elif fref.cls is not None and (guard := _lazy_capture(node, region)) is not None:
                    # ``if self.graph is None: capture`` then replay, on every call: all of it but that ``if``
                    loops += [(node.lineno, guard.lineno - 1), (guard.end_lineno + 1, node.end_lineno)]
                elif type(node) is ast.Module or (region.scope is not None and fref.key == region.scope.key):
                    loops.append((line, getattr(node, "end_lineno", line)))  # one replay: what follows it
                else:  # a method that replays once per call (a runner's run()): all of it runs between replays
                    loops.append((node.lineno, node.end_lineno))
        if loops:
            out.append((facts, loops))
    return out


def _lazy_capture(method, region):
    """The outermost ``if`` of a method whose body holds the region's capture (``if self.graph is None:``), or None."""
    line = region.stmt.lineno
    for node in ast.walk(method):
        if type(node) is ast.If and node.body[0].lineno <= line <= node.body[-1].end_lineno:
            return node
    return None


def _writes(sf, between, ctx, out: dict, recapture=None, callees=True, compiled_objects=frozenset(),
            graphed=frozenset()) -> None:
    """The writes ``between(line)`` selects in ``sf`` (and, with ``callees``, the callees it calls there).
    ``recapture``: the capturing function; a call of it captures again, so what it sets is not a change
    under the old graph. ``compiled_objects``: names the compiled callable is called through, whose
    attributes are its own even where their class is unknown. ``graphed``: the keys of the functions the
    graphed or compiled callable runs; a call of one between replays runs the graph, not their Python."""
    project = ctx.project
    is_module = type(sf.fref.node) is ast.Module
    for s in sf.stores:
        line = s.node.lineno
        if not between(line) or is_tensor(s.kind) or type(s.kind) is tuple or not python_number_binding(s, sf):
            continue
        change = Change(sf.module, s.node, literal=True)
        out.setdefault(("local", sf.fref.key, s.name), []).append(change)
        if is_module or s.name in sf.global_names:
            out.setdefault(("global", sf.module.path, s.name), []).append(change)
    for owner, attr, stmt in sf.attr_stores:
        if between(stmt.lineno) and _python_value(sf, stmt) and not _autograd_context(sf, owner):
            cls = instance_class(sf, sf.infer(owner)) or _isinstance_class(sf, owner, stmt)
            if cls is not None or held_by_self(owner, sf) or owner.id in compiled_objects or _module_part(sf, owner, stmt):
                # ``for layer in self.layers: layer.flag = ...``; ``model.horizon = h`` before ``model(x)``
                out.setdefault(("attr", attr), []).append(Change(sf.module, stmt, cls, literal=_literal_store(sf, stmt)))
    if sf.cls is not None:
        for store in sf.self_stores:
            if between(store.stmt.lineno) and not is_tensor(store.kind) and type(store.kind) is not tuple:
                out.setdefault(("attr", store.attr), []).append(
                    Change(sf.module, store.stmt, sf.cls, literal=_literal_store(sf, store.stmt, store.attr)))
    for _owner, attr, stmt in sf.held_stores:  # ``self.model.temperature = t``: a part of unknown class
        if between(stmt.lineno) and _python_value(sf, stmt):
            out.setdefault(("attr", attr), []).append(Change(sf.module, stmt, None, literal=_literal_store(sf, stmt)))
    for target, stmt in sf.item_stores:
        if between(stmt.lineno):
            key = group_key(sf, target)
            if key is not None:
                out.setdefault(("group", key), []).append(Change(sf.module, stmt))
            entry = global_entry(sf, target)
            if entry is not None:  # ``CFG["dt"] = adapt_dt(vel)``: an entry of a module-level dict
                out.setdefault(("global_item", sf.module.path, *entry), []).append(Change(sf.module, stmt))
            written = entry_written(target)
            if written is not None:  # ``runner.cfg["gain"] = g`` between replays
                out.setdefault(("self_item", *written), []).append(
                    Change(sf.module, stmt, sf.cls if _on_self(sf, target) else None, literal=_literal_store(sf, stmt)))
    for c in sf.calls if callees else ():
        line = c.node.lineno
        if not between(line):
            continue
        if c.meth == "step" and type(c.recv) is tuple and c.recv[0] == "scheduler":
            out.setdefault(("scheduler",), []).append(Change(sf.module, c.node))
            continue
        for target in ctx.resolve(sf, c):
            if (recapture is not None and target.key == recapture.key) or target.key in graphed:
                continue
            _writes_in_callee(facts_of(project, target), (sf.module, c.node), out)
            _writes_further_down(facts_of(project, target), (sf.module, c.node), ctx, out, recapture,
                                 {target.key, *graphed})


def _writes_in_callers_loops(facts, region, ctx, out: dict) -> None:
    """A function that calls the compiled code (``train_epoch``), called in a loop of its file
    (``for epoch ...: SMOOTH["value"] = ...; train_epoch(...)``): what that loop writes changes between
    calls of the compiled code."""
    fref = facts.fref
    if type(fref.node) is ast.Module:
        return
    for caller, call in call_sites(ctx.project, fref.name, fref):
        if caller.module is not region.module:
            continue
        cf = facts_of(ctx.project, caller)
        loops = [(lp.lineno, lp.end_lineno) for lp in cf.loops if lp.lineno <= call.lineno <= lp.end_lineno]
        if loops:
            lo, hi = loops[-1]
            _writes(cf, lambda line, lo=lo, hi=hi: lo <= line <= hi, ctx, out, callees=False)


def _writes_further_down(tf, via, ctx, out: dict, recapture, seen: set, depth: int = 1) -> None:
    """What the callees of a function called between replays write, a few calls down (``self._fire(
    "on_epoch_end")`` runs each callback's hook, which sets the optimizer's learning rate). Functions that
    capture or replay are not followed: what they set belongs to their own graph."""
    if depth > 2 or ".graph(" in source_of(tf.fref) or \
            any(c.meth in ("replay", "capture_begin", "capture_end") for c in tf.calls):
        return
    for c in tf.calls:
        for target in ctx.resolve(tf, c):
            if target.key in seen or (recapture is not None and target.key == recapture.key):
                continue
            seen.add(target.key)
            inner = facts_of(ctx.project, target)
            if any(cc.meth in ("replay", "capture_begin") for cc in inner.calls) or ".graph(" in source_of(target):
                continue
            _writes_in_callee(inner, via, out)
            _writes_further_down(inner, via, ctx, out, recapture, seen, depth + 1)


def _writes_in_callee(tf, via, out: dict) -> None:
    """A function called between replays: what it stores on ``self`` and in globals, all of it."""
    if tf.cls is not None and tf.fref.name != "__init__":
        for store in tf.self_stores:
            if not is_tensor(store.kind) and type(store.kind) is not tuple:
                out.setdefault(("attr", store.attr), []).append(
                    Change(tf.module, store.stmt, tf.cls, via, _literal_store(tf, store.stmt)))
    for s in tf.stores:
        if s.name in tf.global_names and not is_tensor(s.kind) and type(s.kind) is not tuple:
            out.setdefault(("global", tf.module.path, s.name), []).append(
                Change(tf.module, s.node, None, via, _literal_store(tf, s.node)))
    for target, stmt in tf.item_stores:
        key = group_key(tf, target)
        if key is not None:
            out.setdefault(("group", key), []).append(Change(tf.module, stmt, None, via))
        entry = global_entry(tf, target)
        if entry is not None:
            out.setdefault(("global_item", tf.module.path, *entry), []).append(Change(tf.module, stmt, None, via))


def _setters_in_loops(region, ctx, out: dict) -> None:
    """Methods of the compiled code's classes that set attributes, and functions of its file that set
    globals (``global KEEP_RATIO; KEEP_RATIO = ...``), called in a loop that runs the compiled code
    (``model.anneal(step)`` or ``set_keep_ratio(epoch)`` in the training loop): each call changes a value
    the compiled code reads."""
    project = ctx.project
    reached = {facts.fref.key for facts, _span, _chain in region.reached}
    classes = {facts.cls for facts, _span, _chain in region.reached if facts.cls is not None}
    calls_in = {inv.facts.fref.key for inv in invocations(region, ctx)}  # functions that call the compiled code
    if not calls_in:
        return
    setters = [FuncRef(cls.module, node, cls, name) for cls in classes for name, node in cls.methods.items()
               if name != "__init__" and id(node) not in reached]
    setters += [fref for fref in functions_of(region.module) if fref.cls is None and fref.key not in reached
                and type(fref.node) is not ast.Module and _sets_globals(fref.node)]
    for fref in setters:
        name = fref.name
        setter = facts_of(project, fref)
        if not setter.self_stores and not any(s.name in setter.global_names for s in setter.stores):
            continue
        for caller, call in call_sites(project, name, setter.fref):
            if caller.module is not region.module:
                continue  # a loop in another script is not this compiled code's loop
            cf = facts_of(project, caller)
            loops = [lp for lp in cf.loops if lp.lineno <= call.lineno <= lp.end_lineno]
            if any(_loop_runs(cf, lp, calls_in, ctx) for lp in loops):
                _writes_in_callee(setter, (caller.module, call), out)
                break


def _sets_globals(fn) -> bool:
    """The function declares a ``global`` (and so, in all likelihood, sets it)."""
    return any(type(node) is ast.Global for node in ast.walk(fn))


def _loop_runs(facts, loop, targets: set, ctx) -> bool:
    """The loop calls the compiled code: directly, or through a function that calls it (``model(x)``
    whose forward calls the compiled ``self._fwd``)."""
    if facts.fref.key in targets:
        return True
    for c in facts.calls:
        if loop.lineno <= c.node.lineno <= loop.end_lineno:
            if any(t.key in targets for t in ctx.resolve(facts, c)):
                return True
    return False


def number_loop_target(store) -> bool:
    """``for n in (16, 24, 32)``: the loop variable takes the written numbers."""
    node = store.node
    it = getattr(node, "iter", None)
    return store.loop_target and type(it) in (ast.Tuple, ast.List) and type(node.target) is ast.Name \
        and bool(it.elts) and all(_number_expr(e) for e in it.elts)


def python_number_binding(store, facts=None) -> bool:
    """A binding that evidence says holds a Python number: a literal or arithmetic, a counter, the
    index of ``range``/``enumerate``. Calls are unknown, and are not guessed at."""
    node = store.node
    if is_tensor(store.kind) or type(store.kind) is tuple:
        return False
    if store.loop_target:
        it = getattr(node, "iter", None)
        if type(it) is ast.Name and facts is not None:  # ``ts = x.tolist()`` ... ``for t in ts``
            bound = [s for s in facts.stores if s.name == it.id and s.node.lineno < node.lineno]
            it = getattr(bound[-1].node, "value", None) if bound else None
        if type(it) is ast.Call and type(it.func) is ast.Attribute and it.func.attr == "tolist":
            return type(node.target) is ast.Name  # ``for t in ts.tolist()``: Python numbers
        if type(it) is not ast.Call or type(it.func) is not ast.Name:
            return False
        if it.func.id == "range":
            return True
        if it.func.id == "enumerate":
            target = node.target
            return type(target) is ast.Tuple and bool(target.elts) and type(target.elts[0]) is ast.Name \
                and target.elts[0].id == store.name
        return False
    value = getattr(node, "value", None)
    if value is None:
        return False
    if store.aug:
        return True
    if type(value) is ast.Subscript and facts is not None:  # ``gamma = schedule[i]`` over a tuple of numbers
        return _numbers_literal(_binding_of(facts, value.value, node.lineno))
    return _number_expr(value, facts)


def _counted_up(facts, attr: ast.Attribute) -> bool:
    """``self.<attr>`` that the class counts up by a number (``self.global_iter += 1``): a Python number."""
    if facts is None or facts.cls is None or type(attr.value) is not ast.Name or attr.value.id != facts.self_name:
        return False
    for method in facts.cls.methods.values():
        own = method.args.args[0].arg if method.args.args else None
        for node in ast.walk(method):
            if type(node) is ast.AugAssign and type(node.target) is ast.Attribute and node.target.attr == attr.attr \
                    and type(node.target.value) is ast.Name and node.target.value.id == own \
                    and type(node.value) is ast.Constant and type(node.value.value) in (int, float):
                return True
    return False


def _binding_of(facts, expr, line: int):
    """The literal a name holds: its last assignment above ``line``, or its parameter default."""
    if type(expr) is not ast.Name:
        return None
    bound = [s for s in facts.stores if s.name == expr.id and s.node.lineno < line]
    if bound:
        return getattr(bound[-1].node, "value", None)
    fn = facts.fref.node
    if type(fn) is ast.Module or expr.id not in facts.param_nodes:
        return None
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    defaults = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults):]], args.defaults, strict=True))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None})
    return defaults.get(expr.id)


def _numbers_literal(value) -> bool:
    return type(value) in (ast.Tuple, ast.List) and bool(value.elts) and all(_number_expr(e) for e in value.elts)


def _number_expr(value, facts=None) -> bool:
    """A literal number (or bool), or arithmetic with one: ``0.1``, ``lr * 0.9``, ``-1``, ``1 / (step + 1)``;
    with ``facts``, also an attribute its class counts up (``self.global_iter``)."""
    t = type(value)
    if t is ast.Constant:
        return isinstance(value.value, (int, float, complex)) and value.value is not None
    if t is ast.Attribute:
        return _counted_up(facts, value)
    if t is ast.UnaryOp:
        return _number_expr(value.operand, facts)
    if t is ast.BinOp:  # arithmetic with a number in it (a tensor operand would have made the store a tensor)
        return _number_expr(value.left, facts) or _number_expr(value.right, facts)
    if t is ast.IfExp:
        return _number_expr(value.body, facts) and _number_expr(value.orelse, facts)
    if t is ast.Call and type(value.func) is ast.Name and value.func.id in _NUMBER_BUILTINS:
        return True  # ``float(hist.mean())``, ``int(n * ratio)``: a Python number whatever goes in
    if t is ast.Call and type(value.func) is ast.Name and value.func.id in ("max", "min") and not value.keywords:
        return any(_number_expr(a, facts) for a in value.args)  # ``max(0.0, alpha + 1e-3 * gap)`` (a tensor would use clamp)
    return False


_NUMBER_BUILTINS = frozenset(("float", "int", "bool", "round", "len"))


def scalar_literal(value) -> bool:
    """A Python number, bool or string written as such: ``2.0``, ``True``, ``"sbhd"``, ``lr * 0.9``."""
    if type(value) is ast.Constant:
        return isinstance(value.value, (int, float, complex, str)) and value.value is not None
    return _number_expr(value)


def _arithmetic_of(value, numbers) -> bool:
    """Arithmetic whose every operand is one of ``numbers`` (parameters with number defaults) or a number:
    ``alpha / r`` in ``__init__(self, base, r=16, alpha=32)``."""
    if type(value) is ast.BinOp:
        return _arithmetic_of(value.left, numbers) and _arithmetic_of(value.right, numbers)
    if type(value) is ast.UnaryOp:
        return _arithmetic_of(value.operand, numbers)
    if type(value) is ast.Name:
        return value.id in numbers
    return type(value) is ast.Constant and type(value.value) in (int, float)


def _element_for(stmt, attr: str | None):
    """The value a statement stores into ``attr``: the matching element of ``self.a, self.b = x, y``."""
    value = getattr(stmt, "value", None)
    targets = getattr(stmt, "targets", None)
    if attr is not None and targets and type(targets[0]) is ast.Tuple and type(value) is ast.Tuple \
            and len(targets[0].elts) == len(value.elts):
        for target, element in zip(targets[0].elts, value.elts, strict=True):
            if type(target) is ast.Attribute and target.attr == attr:
                return element
    return value


def _literal_store(facts, stmt, attr: str | None = None) -> bool:
    """What a store writes is a Python scalar by evidence: a literal or arithmetic, a counter, or a
    parameter annotated as a number (``def set_scale(self, s: float)``)."""
    if type(stmt) is ast.AugAssign:
        return True
    value = _element_for(stmt, attr)
    if value is None:
        return False
    if type(value) is ast.Name and value.id in facts.param_nodes:
        return value.id in facts.scalar_params
    if type(value) is ast.Subscript:  # ``self.LEVELS[level]`` with ``LEVELS = {"low": 0.3, ...}``, ``WAVELENGTHS[i]``
        entries = _table_of(facts, value.value)
        targets = getattr(stmt, "targets", None)
        if attr is not None and targets and type(targets[0]) is ast.Tuple:
            # ``self.center, self.width = PRESETS[name]`` with ``PRESETS = {"lung": (-600.0, 1500.0), ...}``
            return bool(entries) and all(type(v) is ast.Tuple and all(scalar_literal(e) for e in v.elts) for v in entries)
        return bool(entries) and all(scalar_literal(v) for v in entries)
    return scalar_literal(value) or command_line_number(facts.module, value) or _number_loop_variable(facts, value)


def command_line_number(module, value) -> bool:
    """``args.lr`` where the file declares ``parser.add_argument("--lr", type=float, ...)`` (or a number
    default, or a ``store_true`` flag): a Python number or flag parsed from the command line."""
    if type(value) is not ast.Attribute or type(value.value) is not ast.Name or "add_argument(" not in module.text:
        return False
    if module.number_options is None:
        module.number_options = _number_options(module.tree)
    return value.attr in module.number_options


def _number_options(tree) -> frozenset:
    out = set()
    for node in ast.walk(tree):
        if type(node) is not ast.Call or type(node.func) is not ast.Attribute or node.func.attr != "add_argument":
            continue
        flags = [a.value for a in node.args if type(a) is ast.Constant and isinstance(a.value, str)]
        keywords = {kw.arg: kw.value for kw in node.keywords if kw.arg}
        dest = keywords.get("dest")
        if type(dest) is ast.Constant and isinstance(dest.value, str):
            name = dest.value
        else:
            long = [f for f in flags if f.startswith("--")] or flags
            if not long:
                continue
            name = long[0].lstrip("-").replace("-", "_")
        kind, default, action = keywords.get("type"), keywords.get("default"), keywords.get("action")
        if type(kind) is ast.Name:
            numeric = kind.id in ("float", "int")
        elif kind is None and type(action) is ast.Constant:
            numeric = action.value in ("store_true", "store_false")
        else:
            numeric = kind is None and _number_expr(default) if default is not None else False
        if numeric:
            out.add(name)
    return frozenset(out)


def _number_loop_variable(facts, value) -> bool:
    """``lam`` of ``for lam in map(float, grid.split(","))``, ``for k in range(n)`` or ``for s in (0.25, 0.5)``:
    a Python number."""
    if type(value) is not ast.Name:
        return False
    loops = [s for s in facts.stores if s.name == value.id]
    if not loops or not all(s.loop_target and type(getattr(s.node, "target", None)) is ast.Name for s in loops):
        return False
    for s in loops:
        it = getattr(s.node, "iter", None)
        if type(it) in (ast.Tuple, ast.List) and it.elts and all(_number_expr(e) for e in it.elts):
            continue  # ``for sigma in (0.25, 0.5, 1.0)``
        if not (type(it) is ast.Call and type(it.func) is ast.Name and (
                it.func.id == "range" or it.func.id == "map" and it.args and type(it.args[0]) is ast.Name
                and it.args[0].id in ("float", "int"))):
            return False
    return True


def _table_of(facts, expr) -> list | None:
    """The entries of the dict, list or tuple literal a class-body (``self.LEVELS``) or module-level
    (``LEVELS``) name is bound to."""
    value = None
    if type(expr) is ast.Attribute and type(expr.value) is ast.Name and expr.value.id == facts.self_name \
            and facts.cls is not None:
        value = next((v for c in facts.cls.mro(facts.project) for v in [c.field(expr.attr)] if v is not None), None)
    elif type(expr) is ast.Name:
        bound = bound_values(facts.module.tree.body, expr.id)
        value = bound[-1] if bound else None
    if type(value) is ast.Dict:
        return list(value.values)
    return list(value.elts) if type(value) in (ast.List, ast.Tuple) else None


def initial_literal(read, ctx) -> bool:
    """The value a region reads starts as a Python scalar: ``self.scale = 2.0`` in ``__init__``, or a
    module-level ``temperature = 1.0``."""
    key = read.key
    project = ctx.project
    if key[0] == "attr" and read.cls is not None:
        for klass in read.cls.mro(project):
            field = klass.field(key[1])  # ``prior_var: float = 4.0`` in a dataclass
            if field is not None:
                return scalar_literal(field)
            init = klass.methods.get("__init__")
            if init is None:
                continue
            init_facts = facts_of(project, FuncRef(klass.module, init, klass, "__init__"))
            for store in init_facts.self_stores:
                if store.attr == key[1] and store.value is not None:
                    value = _element_for(store.stmt, store.attr)
                    if type(value) is ast.Name and value.id in init_facts.params:  # ``self.decay = decay``
                        return value.id in init_facts.scalar_params
                    return scalar_literal(value) or command_line_number(klass.module, value) \
                        or _arithmetic_of(value, init_facts.scalar_params)
        return False
    if key[0] == "global":
        module = read.module
        for s in facts_of(project, module.body_ref).stores:
            if s.name == key[-1] and not s.aug:
                return scalar_literal(getattr(s.node, "value", None))
    if key[0] == "self_item" and read.cls is not None:
        for klass in read.cls.mro(project):
            init = klass.methods.get("__init__")
            if init is None:
                continue
            init_facts = facts_of(project, FuncRef(klass.module, init, klass, "__init__"))
            for store in init_facts.self_stores:
                value = _element_for(store.stmt, store.attr) if store.attr == key[1] and store.value is not None else None
                if type(value) is ast.Dict:
                    return any(type(k) is ast.Constant and k.value == key[2] and scalar_literal(v)
                               for k, v in zip(value.keys, value.values, strict=True))
                if value is not None and _settings_dict(init_facts, value):
                    return True  # ``self.cfg = json.load(open(path))``: numbers and strings
        return False
    if key[0] == "global_item":
        value = _module_dict(read.module, key[2])
        for k, v in zip(value.keys, value.values, strict=True) if value is not None else ():
            if type(k) is ast.Constant and k.value == key[3]:
                return scalar_literal(v)
    return False


def entry_written(target) -> tuple | None:
    """``(attr, key)`` for a store into ``<obj>.<attr>[key]`` (``self.params[name] = v``: key None)."""
    value = target.value
    if type(value) is not ast.Attribute:
        return None
    key = target.slice
    return (value.attr, key.value if type(key) is ast.Constant and isinstance(key.value, str) else None)


def _on_self(facts, target) -> bool:
    value = target.value
    return type(value) is ast.Attribute and type(value.value) is ast.Name and value.value.id == facts.self_name


def self_entry(facts, target) -> tuple | None:
    """``(attr, key)`` for ``self.cfg["radius"]`` (a constant key; None for ``self.params[name]``): an entry
    of a settings dict the object holds."""
    value = target.value
    if type(value) is not ast.Attribute or type(value.value) is not ast.Name or value.value.id != facts.self_name:
        return None
    key = target.slice
    return (value.attr, key.value if type(key) is ast.Constant and isinstance(key.value, str) else None)


# Calls that read settings from a file: what they give is host data (numbers, strings, lists), never tensors.
_CONFIG_LOADS = frozenset(("json.load", "json.loads", "yaml.safe_load", "yaml.load", "tomllib.load", "toml.load"))


def _settings_dict(facts, value) -> bool:
    """A dict literal of Python numbers, flags and strings, or settings read from a file
    (``json.load(open(path))``); not a dict of tensors (``{k: v.cuda() for k, v in db.items()}``)."""
    if type(value) is ast.Dict:
        return bool(value.values) and all(scalar_literal(v) or type(v) is ast.Constant for v in value.values)
    return type(value) is ast.Call and facts.qual(value.func) in _CONFIG_LOADS


def global_entry(facts, target) -> tuple | None:
    """``(name, key)`` for ``CFG["dt"]`` where ``CFG`` is a dict literal bound at the module's top level
    (and not a local or parameter of the function)."""
    if type(target) is not ast.Subscript or type(target.value) is not ast.Name:
        return None
    key = target.slice
    if type(key) is not ast.Constant or not isinstance(key.value, str):
        return None
    name = target.value.id
    is_module = type(facts.fref.node) is ast.Module
    if not is_module and (name in facts.params or any(s.name == name for s in facts.stores)):
        return None
    return (name, key.value) if _module_dict(facts.module, name) is not None else None


def _module_dict(module, name: str):
    """The dict literal that ``name`` is bound to at the module's top level (its only binding), or None."""
    found = bound_values(module.tree.body, name)
    return found[0] if len(found) == 1 and type(found[0]) is ast.Dict else None


def _python_value(sf, stmt) -> bool:
    """``obj.attr = value`` where the value is not a tensor or an object we know (a number, a flag,
    a string or a call's result)."""
    value = getattr(stmt, "value", None)
    if type(stmt) is ast.AugAssign:
        return True
    if value is None:
        return False
    kind = sf.infer(value)
    return not is_tensor(kind) and type(kind) is not tuple


def group_key(facts, target: ast.Subscript) -> str | None:
    """``g["lr"]`` where ``g`` iterates ``opt.param_groups``, or ``opt.param_groups[0]["lr"]``."""
    key = target.slice
    if type(key) is not ast.Constant or key.value not in GROUP_KEYS or _param_groups_of(facts, target) is None:
        return None
    return key.value


def group_owner(facts, target: ast.Subscript) -> str | None:
    """The optimizer whose param group ``target`` writes: ``opt`` for ``opt.param_groups[0]["lr"]`` or
    for ``g["lr"]`` with ``g`` iterating ``opt.param_groups``."""
    groups = _param_groups_of(facts, target)
    return _text(groups.value) if groups is not None else None


def iterates_param_groups(loop) -> bool:
    it = getattr(loop, "iter", None)
    return type(it) is ast.Attribute and it.attr == "param_groups"


def _param_groups_of(facts, target: ast.Subscript):
    """The ``opt.param_groups`` expression behind an entry ``target`` of one group, or None."""
    owner = target.value
    if type(owner) is ast.Subscript and type(owner.value) is ast.Attribute and owner.value.attr == "param_groups":
        return owner.value
    if type(owner) is ast.Name:
        for s in facts.stores:
            if s.name == owner.id and s.loop_target:
                if iterates_param_groups(s.node):
                    return s.node.iter
                zipped = _zipped_param_groups(s.node, owner.id)
                if zipped is not None:
                    return zipped
    return None


def _zipped_param_groups(loop, name: str):
    """``for group, scale in zip(opt.param_groups, scales)``: ``opt.param_groups`` when ``name`` is the
    element taken from it."""
    it, target = getattr(loop, "iter", None), getattr(loop, "target", None)
    if type(it) is not ast.Call or type(it.func) is not ast.Name or it.func.id != "zip" or type(target) is not ast.Tuple:
        return None
    for element, source in zip(target.elts, it.args, strict=False):
        if type(element) is ast.Name and element.id == name and type(source) is ast.Attribute \
                and source.attr == "param_groups":
            return source
    return None


# -- what a region reads ---------------------------------------------------------------------------
@dataclass
class Read:
    key: tuple
    module: object
    node: object
    cls: ClassIndex | None = None
    facts: object = None  # the function where it is read
    chain: list = field(default_factory=list)  # the calls from the region to that function


def reads_in_region(region, ctx) -> list[Read]:
    """The Python values the region's code reads: the capture scope's own names (read before the
    region sets them), globals, ``self`` attributes and attributes of known objects."""
    out = []
    near = around(region, ctx)
    scope_key = region.scope.key if region.scope is not None else None
    for facts, (lo, hi), chain in region.reached:
        failing = ctx.memo(("error path", facts.fref.key), lambda fn=facts.fref.node: _error_path(fn))
        in_scope = near is not None and facts.fref.key == scope_key
        if in_scope:
            for name, node in near.reads.items():
                out.append(Read(("local", scope_key, name), facts.module, node, None, facts, chain))
        local = {s.name for s in facts.stores} | set(facts.params)
        is_module = type(facts.fref.node) is ast.Module
        for node in facts.loads:
            if lo <= node.lineno <= hi and (is_module or (node.id not in local or node.id in facts.global_names)):
                out.append(Read(("global", facts.module.path, node.id), facts.module, node, None, facts, chain))
        for node, _stmt in facts.subscripts:
            entry = global_entry(facts, node) if lo <= node.lineno <= hi else None
            if entry is not None:
                out.append(Read(("global_item", facts.module.path, *entry), facts.module, node, None, facts, chain))
        if facts.cls is not None:
            for node in facts.self_loads:
                if lo <= node.lineno <= hi and id(node) not in failing:
                    out.append(Read(("attr", node.attr), facts.module, node, facts.cls, facts, chain))
            for node, _stmt in facts.subscripts:  # ``self.cfg["radius"]``: an entry of a settings dict
                entry = self_entry(facts, node) if lo <= node.lineno <= hi and id(node) not in failing else None
                if entry is not None and entry[1] is not None:
                    out.append(Read(("self_item", *entry), facts.module, node, facts.cls, facts, chain))
        for node in facts.attr_loads:
            if lo <= node.lineno <= hi and id(node) not in failing:
                kind = facts.infer(node.value)
                cls = instance_class(facts, kind)
                if cls is None and kind is None and type(node.value) in (ast.Name, ast.Attribute):
                    cls = only_class_setting(facts.module, node.attr, ctx)  # ``model.margin``, model untyped
                if cls is not None:
                    out.append(Read(("attr", node.attr), facts.module, node, cls, facts, chain))
    return out


def _error_path(fn) -> set[int]:
    """The nodes of a function that run only when it is failing anyway: in a ``raise`` statement, or in
    an ``assert``'s message."""
    out: set[int] = set()
    for node in ast.walk(fn):
        part = node.exc if type(node) is ast.Raise else node.msg if type(node) is ast.Assert else None
        if part is not None:
            out.update(id(n) for n in ast.walk(part))
    return out


def only_class_setting(module, attr: str, ctx) -> ClassIndex | None:
    """The one class of the file whose ``__init__`` (or class body: a dataclass field) sets ``attr``: what
    an object of unknown type read as ``obj.<attr>`` most likely is (None when no class, or several, set it)."""
    return ctx.memo(("only class setting", id(module), attr), lambda: _only_class_setting(module, attr, ctx.project))


def _only_class_setting(module, attr: str, project) -> ClassIndex | None:
    owners = []
    for cls in module.classes.values():
        init = cls.methods.get("__init__")
        if (init is not None and any(s.attr == attr for s in facts_of(project, FuncRef(module, init, cls, "__init__")).self_stores)) \
                or cls.field(attr) is not None:
            owners.append(cls)
    return owners[0] if len(owners) == 1 else None



def instance_class(facts, kind, _depth: int = 0) -> ClassIndex | None:
    """The class of an object: an instance, the module inside ``torch.compile(...)`` (whose
    attributes it forwards) or inside ``DistributedDataParallel(...)``."""
    if type(kind) is not tuple or _depth > 3:
        return None
    if kind[0] == "inst":
        return kind[1]
    if kind[0] == "compiled":
        call = kind[1]
        return instance_class(facts, facts.infer(call.args[0]), _depth + 1) if call.args else None
    if kind[0] == "ddp" and len(kind) > 2:
        return instance_class(facts, kind[2], _depth + 1)
    return None


def related(a: ClassIndex | None, b: ClassIndex | None, project) -> bool:
    """Whether an attribute written on an object of class ``a`` can be the one read as ``b``'s."""
    if a is None or b is None:
        return True
    return a is b or a in b.mro(project) or b in a.mro(project)


def optimizer_steps(region) -> list:
    """``opt.step()`` calls the region runs (facts, call), for param-group values read at capture."""
    out = []
    for facts, (lo, hi), _chain in region.reached:
        for c in facts.calls:
            if c.meth == "step" and lo <= c.node.lineno <= hi and type(c.recv) is tuple and (
                    c.recv[0] == "optim" or c.recv[0] == "inst" and c.recv[1].is_optimizer(facts.project)):
                out.append((facts, c))
    return out


def tensor_lr(optimizer_kind) -> bool:
    """``Adam(..., lr=torch.tensor(1e-3))``: schedulers then fill the tensor in place."""
    ctor = optimizer_kind[2] if len(optimizer_kind) > 2 else None
    if type(ctor) is not ast.Call:
        return False
    for kw in ctor.keywords:
        if kw.arg == "lr" and type(kw.value) is ast.Call:
            parts = dotted(kw.value.func)
            return bool(parts) and parts[-1] in ("tensor", "full", "as_tensor", "ones", "zeros")
    return False


__all__ = [
    "Around", "Change", "Invocation", "Read", "around", "changes_between", "compiled_names", "group_key", "group_owner", "iterates_param_groups",
    "bound_from", "global_entry", "initial_literal", "instance_class", "invocations", "kept_in", "returned_positions", "replay_sites", "kind_before", "number_loop_target", "optimizer_steps", "python_number_binding", "reads_in_region", "related",
    "assigns_attribute", "configured_here", "lines_after_capture", "only_class_setting", "replay_loops", "scalar_literal", "tensor_lr",
]


def kind_before(sf, name: str, line: int):
    """The kind of ``name`` as last stored above ``line`` in ``sf`` (None when unknown)."""
    kind = None
    for s in sf.stores:
        if s.name == name and s.node.lineno < line:
            kind = s.kind
    return kind
