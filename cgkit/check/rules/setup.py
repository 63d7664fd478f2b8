"""CG5xx: API configuration around a capture (autocast, optimizers, hooks, DDP, warm-up)."""

from __future__ import annotations

import ast
import copy

from cgkit.check.around import bound_from, returned_positions
from cgkit.check.callers import argument_for, call_sites, functions_of, source_of
from cgkit.check.facts import class_attrs, facts_of, is_callable_module, module_facts
from cgkit.check.model import Rule
from cgkit.check.names import bound_values
from cgkit.check.project import FuncRef
from cgkit.check.rules._base import Calls, Each, Family, Region, code, found, is_false, is_true, text_of

# torch.optim classes with a `capturable` flag whose step() refuses capture when it is False
# (they call Optimizer._accelerator_graph_capture_health_check).
CAPTURABLE_OPTIMIZERS = frozenset("Adam AdamW Adamax ASGD NAdam RAdam RMSprop Rprop Adadelta".split())
_HOOK_METHODS = frozenset(
    """register_forward_hook register_forward_pre_hook register_full_backward_hook
    register_full_backward_pre_hook register_backward_hook""".split()
)
_AUTOCAST = ("torch.autocast", "torch.cpu.amp.autocast")
_DDP = "torch.nn.parallel.DistributedDataParallel"
_CAPTURES = ("torch.cuda.graph", "capture_begin")  # manual captures of a block of code
_GRAPHED_CALLABLES = ("make_graphed_callables", "te.make_graphed_callables")

RULES = Family()


def _manual(region) -> bool:
    return region.klass == "manual" and region.scope is not None


@RULES.rule(
    Rule(
        code="CG501",
        name="autocast-cache-enabled",
        category="autocast-cache",
        message="autocast with its weight-cast cache enabled (the default) around {what}",
        fix="Pass `cache_enabled=False` to `torch.autocast(...)` around capture and graphed callables.",
        compile=None,
        what="Checks for `torch.autocast` without `cache_enabled=False` around a manual capture or a "
        "`make_graphed_callables` call, also where a helper enters it (`with self._precision():`, a "
        "`@contextmanager` that enters `torch.autocast` around its `yield`, or a method that returns one); reported at "
        "the autocast's own line. `enabled=False` is no autocast and is not reported.",
        why="Autocast caches the low-precision copies of weights it makes inside its context. Around a "
        "capture, casts made before capture are reused by the graph instead of being recorded, so "
        "after the optimizer updates the weights replays keep using stale copies. "
        "`torch.cuda.make_graphed_callables` refuses to run under a caching autocast and raises "
        "\"make_graphed_callables does not support the autocast caching. Please set "
        "`cache_enabled=False`.\"",
        example=code("""
            import torch

            model = torch.nn.Linear(64, 64).cuda()
            x = torch.randn(8, 64, device="cuda")
            with torch.autocast("cuda", dtype=torch.bfloat16):
                graphed = torch.cuda.make_graphed_callables(model, (x,))
        """),
        use_instead=code("""
            import torch

            model = torch.nn.Linear(64, 64).cuda()
            x = torch.randn(8, 64, device="cuda")
            with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
                graphed = torch.cuda.make_graphed_callables(model, (x,))
                y = graphed(x)
        """),
    ),
    Region(),
)
def autocast_cache_enabled(region, ctx):
    """A caching autocast around the capture or the make_graphed_callables call."""
    if not _manual(region) or region.kind == "declared":
        return
    sf = facts_of(ctx.project, region.scope)
    what = "`make_graphed_callables`" if "make_graphed_callables" in region.kind else "a CUDA graph capture"
    for anc in region.ancestors:
        if type(anc) in (ast.With, ast.AsyncWith):
            yield from _caching_autocast(sf, anc, what, region.module, ctx)
    stmt = region.stmt  # ``with self._precision(), torch.cuda.graph(g):``: the items entered before the capture
    if type(stmt) in (ast.With, ast.AsyncWith):
        before = [item for item in stmt.items if item.context_expr is not region.node
                  and item.context_expr.col_offset < getattr(region.node, "col_offset", 0)]
        yield from _caching_autocast(sf, ast.With(items=before, body=[]), what, region.module, ctx)
    # The capturing function decorated with a caching autocast (``@torch.autocast("cuda") def capture(self):``).
    for dec in getattr(region.scope.node, "decorator_list", ()) if region.scope is not None else ():
        yield from _caching_autocast_call(sf, dec, what, region.module)
    # A capturing function called under a caching autocast (``with torch.autocast(...): runner.capture()``).
    if region.scope is not None and type(region.scope.node) is not ast.Module:
        for caller, call in call_sites(ctx.project, region.scope.name, region.scope):
            cf = facts_of(ctx.project, caller)
            for w in cf.withs:
                if w.lineno <= call.lineno <= w.end_lineno:
                    yield from _caching_autocast(cf, w, f"{what} (in `{text_of(call.func)}()`)", caller.module, ctx)


def _caching_autocast(facts, with_node, what, module, ctx):
    for item in with_node.items:
        yield from _caching_autocast_call(facts, item.context_expr, what, module)
        yield from _caching_autocast_helper(facts, item.context_expr, what, ctx)


def _caching_autocast_helper(facts, expr, what, ctx):
    """``with self._precision():`` (a ``@contextmanager`` that enters ``torch.autocast(...)``) or ``with
    self.amp.context():`` (a method that returns one): the caching autocast, at its line in the helper."""
    call = next((c for c in facts.calls if c.node is expr), None) if type(expr) is ast.Call else None
    for target in ctx.resolve(facts, call) if call is not None else ():
        tf = facts_of(ctx.project, target)
        # a ``@contextmanager``: the ``with`` around its ``yield`` (one that ends before it wraps no capture)
        entered = [item.context_expr for w in tf.withs if any(type(n) in (ast.Yield, ast.YieldFrom) for n in ast.walk(w))
                   for item in w.items]
        returned = [r.value for r in ast.walk(target.node) if type(r) is ast.Return and r.value is not None]
        for node in (*entered, *returned):
            yield from _caching_autocast_call(tf, node, f"{what} (through `{text_of(expr.func)}()`)", target.module)


def _caching_autocast_call(facts, expr, what, module):
    """``torch.autocast(...)`` without ``cache_enabled=False``, in a ``with`` or as a decorator."""
    if type(expr) is ast.Call and facts.qual(expr.func) in _AUTOCAST:
        flag = next((kw.value for kw in expr.keywords if kw.arg == "cache_enabled"), None)
        enabled = next((kw.value for kw in expr.keywords if kw.arg == "enabled"), None)
        if not is_false(flag) and not is_false(enabled):  # ``enabled=False``: no autocast, no cache
            yield found(expr, module=module, what=what)


@RULES.rule(
    Rule(
        code="CG502",
        name="optimizer-not-capturable",
        category="optimizer",
        message="`{what}` is captured but the optimizer (created at L{line}) has no `capturable=True`; capture fails here",
        fix="Create the optimizer with `capturable=True` (for example `torch.optim.{cls}(params, lr=..., capturable=True)`).",
        compile=None,
        what="Checks for `optimizer.step()` inside a manual capture when the optimizer was built "
        "without `capturable=True` (or with `capturable=False`); a flag passed as a variable "
        "(`capturable=cfg.use_cuda_graphs`) is taken as set for the capture.",
        why="Adam, AdamW, Adamax, ASGD, NAdam, RAdam, RMSprop, Rprop and Adadelta keep their step "
        "count on the host unless `capturable=True`, and their `step()` refuses to run under capture: "
        "\"Attempting CUDA graph capture of step() for an instance of Adam but param_groups' "
        "capturable is False.\"",
        example=code("""
            import torch

            model = torch.nn.Linear(8, 8).cuda()
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            x = torch.randn(4, 8, device="cuda")
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    opt.zero_grad(set_to_none=True)
                    model(x).sum().backward()
                    opt.step()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            opt.zero_grad(set_to_none=True)
            with torch.cuda.graph(g):
                model(x).sum().backward()
                opt.step()
        """),
        use_instead=code("""
            import torch

            model = torch.nn.Linear(8, 8).cuda()
            opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=True)
            x = torch.randn(4, 8, device="cuda")
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    opt.zero_grad(set_to_none=True)
                    model(x).sum().backward()
                    opt.step()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            opt.zero_grad(set_to_none=True)
            with torch.cuda.graph(g):
                model(x).sum().backward()
                opt.step()
            g.replay()
        """),
    ),
    Calls(methods=("step",)),
)
def optimizer_not_capturable(c, f):
    if type(c.recv) is tuple and c.recv[0] == "optim":
        qual, ctor = c.recv[1], c.recv[2]
        cls = qual.rsplit(".", 1)[-1]
        if cls in CAPTURABLE_OPTIMIZERS and not _capturable(ctor):
            yield found(c.node, c.stmt, what=f"{text_of(c.node.func.value)}.step()", line=ctor.lineno, cls=cls)


def _capturable(ctor: ast.Call) -> bool:
    for kw in ctor.keywords:
        if kw.arg == "capturable":  # ``capturable=cfg.use_cuda_graphs``: set for graphing, whatever it is now
            return is_true(kw.value) or type(kw.value) is not ast.Constant
        if kw.arg is None:
            return True  # **kwargs: cannot tell
    return False


@RULES.rule(
    Rule(
        code="CG503",
        name="hooks-before-graphing",
        category="api-misuse",
        message="`{what}` registers a module hook before `make_graphed_callables` graphs the module{detail}",
        fix="Register hooks after graphing (on the returned module), or graph a module without hooks.",
        compile=None,
        what="Checks for forward/backward hooks registered on a module before it is passed to "
        "`make_graphed_callables`, or on a part of it (`model.encoder`, `self.enc` in its `__init__`), also by "
        "a function or method handed the module (`probe.install(model.blocks[0])`), at the hook's line.",
        why="Graphed callables replace the module's forward with a replay of the graph, so hooks could "
        "not run inside it. `torch.cuda.make_graphed_callables` (and Transformer Engine's) therefore "
        "asserts that the modules it receives have no forward, forward-pre or backward hooks registered. "
        "It does not look at their submodules: a hook on a part runs while the module is warmed up and "
        "captured, and never again; replays repeat only the GPU work the hook launched during capture.",
        example=code("""
            import torch

            model = torch.nn.Linear(8, 8).cuda()
            model.register_forward_hook(lambda mod, args, out: None)
            x = torch.randn(4, 8, device="cuda", requires_grad=True)
            graphed = torch.cuda.make_graphed_callables(model, (x,))
        """),
        use_instead=code("""
            import torch

            model = torch.nn.Linear(8, 8).cuda()
            x = torch.randn(4, 8, device="cuda", requires_grad=True)
            graphed = torch.cuda.make_graphed_callables(model, (x,))
            graphed.register_forward_hook(lambda mod, args, out: None)  # after graphing
            y = graphed(x)
        """),
    ),
    Region(),
)
def hooks_before_graphing(region, ctx):
    if not _manual(region) or region.kind not in _GRAPHED_CALLABLES:
        return
    sf = facts_of(ctx.project, region.scope)
    rs = region.stmt.lineno
    targets = list(region.targets)
    body = region.scope.node.body if type(region.scope.node) is not ast.Module else []
    for t in region.targets:  # ``modules = (self.embed, *self.blocks)`` then ``make_graphed_callables(modules, ...)``
        bound = bound_values(body, t.id) if type(t) is ast.Name else []
        if len(bound) == 1:
            targets.append(bound[0])
    names = _graphed_names(targets) | _iterated_by_graphing(region, sf)
    whole = {text_of(t) for t in targets if is_callable_module(sf.infer(t), ctx.project)}  # one module each
    hooks = []  # (module, call, text)
    parts = []  # hooks on a part of a graphed module: not refused, but not replayed either
    # What runs before the graphing call: the lines above it, and the constructor of the class whose
    # method graphs (``self.l1.register_forward_hook(...)`` in ``__init__``, graphed in ``graph_layers``).
    before = [(sf, [c for c in sf.calls if c.node.lineno < rs])]
    scope = region.scope
    if scope.cls is not None and scope.name != "__init__" and "__init__" in scope.cls.methods:
        init = facts_of(ctx.project, FuncRef(scope.cls.module, scope.cls.methods["__init__"], scope.cls, "__init__"))
        if init.self_name == sf.self_name:
            before.append((init, list(init.calls)))
    for facts, calls in before:
        for c in calls:
            if c.meth not in _HOOK_METHODS:
                for module, hook, receiver in _hooks_put_by_helper(facts, c, ctx):  # ``probe.install(model.enc)``
                    held = text_of(_container(receiver))
                    if held in names and (held == text_of(receiver) or held not in whole):
                        hooks.append((module, hook, f"{text_of(receiver)}.{hook.func.attr}()"))
                    elif held in names or _part_of(held, names):
                        parts.append((module, hook))
                continue
            receiver = text_of(c.node.func.value)
            held = text_of(_container(c.node.func.value, facts, c.node.lineno))
            # ``blocks[0]`` of graphed ``tuple(blocks)`` is graphed itself; ``stack[0]`` of a graphed
            # ``stack`` is a part of it, like ``imputer.est``.
            if held in names and (held == receiver or held not in whole):
                hooks.append((region.module, c.node, f"{receiver}.{c.meth}()"))
            elif held in names or _part_of(held, names):
                parts.append((region.module, c.node))
    # A graphing helper (``def graph_modules(modules, ...)``): hooks its callers put on what they pass.
    params = [t.id for t in region.targets if type(t) is ast.Name and t.id in sf.params]
    if params and type(region.scope.node) is not ast.Module:
        positional = region.scope.positional_params
        for caller, call in call_sites(ctx.project, region.scope.name, region.scope):
            cf = facts_of(ctx.project, caller)
            passed = {text_of(a) for p in params for a in [argument_for(call, positional, p)] if a is not None}
            for c in cf.calls:
                if c.meth in _HOOK_METHODS and c.node.lineno < call.lineno and text_of(_container(c.node.func.value)) in passed:
                    hooks.append((caller.module, c.node, f"{text_of(c.node.func.value)}.{c.meth}()"))
    for root in region.roots if not region.roots_guessed else ():  # a guess of the class is no evidence here
        if root.cls is not None:
            for klass in root.cls.mro(ctx.project):
                for call in class_attrs(klass, ctx.project).hooks:
                    if call.func.attr not in _HOOK_METHODS:  # not load_state_dict or state_dict hooks
                        continue
                    if type(call.func.value) is ast.Name:
                        hooks.append((klass.module, call, f"self.{call.func.attr}() in {klass.name}"))
                    else:  # ``self.enc.register_forward_pre_hook(...)``: on a part of the module
                        parts.append((klass.module, call))
    for module, call, what in hooks:
        yield found(call, module=module, what=what, detail="")
    for module, call in parts:
        yield found(call, module=module, what=f"{text_of(call.func.value)}.{call.func.attr}()",
                    detail=" (a part of a graphed module: torch does not refuse it, but its Python code runs only "
                    "during warm-up and capture; replays repeat only the GPU work it launched then)")
    if hooks:  # and at the graphing call, where the assertion will fire
        module, call, what = hooks[0]
        where = f"L{call.lineno}" if module is region.module else f"{module.path}:{call.lineno}"
        more = f" and {len(hooks) - 1} more" if len(hooks) > 1 else ""
        yield found(region.node, what=f"{what} ({where}){more}", detail="")


def _hooks_put_by_helper(facts, call, ctx):
    """Hooks that a function or method called here registers on a module it is handed
    (``def install(self, module): module.register_forward_pre_hook(...)`` called as
    ``probe.install(model.layers[0])``): ``(module, hook call, receiver as the caller names it)``."""
    for target in ctx.resolve(facts, call):
        text = source_of(target) if type(target.node) is not ast.Module else ""
        if "register_" not in text or ".remove()" in text:
            continue  # (a helper that takes its hook off again before it returns leaves none behind)
        params = target.positional_params
        for node in ast.walk(target.node):
            if type(node) is not ast.Call or type(node.func) is not ast.Attribute or node.func.attr not in _HOOK_METHODS:
                continue
            root = node.func.value
            while type(root) in (ast.Attribute, ast.Subscript):
                root = root.value
            if type(root) is not ast.Name:
                continue
            handed, element = root.id, False
            if handed not in params:  # ``for i, layer in enumerate(layers): layer.register_...``
                handed, element = _param_iterated(target.node, root.id, params), True
            arg = argument_for(call.node, params, handed) if handed is not None else None
            if arg is not None:
                value = ast.Subscript(value=arg, slice=ast.Constant(0), ctx=ast.Load()) if element else arg
                yield target.module, node, _substituted(node.func.value, root.id, value)


def _param_iterated(fn, name: str, params) -> str | None:
    """The parameter a loop of ``fn`` takes ``name`` from (``for layer in layers``, ``enumerate(layers)``)."""
    for loop in (n for n in ast.walk(fn) if type(n) is ast.For):
        targets = {t.id for t in ast.walk(loop.target) if type(t) is ast.Name}
        it = loop.iter
        if type(it) is ast.Call and type(it.func) is ast.Name and it.func.id in ("enumerate", "reversed") and it.args:
            it = it.args[0]
        if name in targets and type(it) is ast.Name and it.id in params:
            return it.id
    return None


def _substituted(expr, name: str, value):
    """``expr`` with the name ``name`` replaced by the expression ``value``: ``model.layers[0]`` with
    ``model`` -> ``self.m`` gives ``self.m.layers[0]``."""
    class Put(ast.NodeTransformer):
        def visit_Name(self, node):
            return value if node.id == name else node
    return Put().visit(copy.deepcopy(expr))


def _iterated_by_graphing(region, sf) -> set:
    """The lists whose modules are graphed one by one: ``[make_graphed_callables(layer, ...) for layer in
    self.layers]``, or the same in a ``for`` loop around the graphing call (``self.layers[-1]`` is one)."""
    targets = {t.id for t in region.targets if type(t) is ast.Name}
    out = set()
    for node in ast.walk(region.stmt):
        if type(node) is ast.comprehension and type(node.target) is ast.Name and node.target.id in targets:
            out.add(text_of(_container(node.iter)))
    for t in region.targets:
        if type(t) is ast.Name:
            held = _container(t, sf, region.stmt.lineno)
            if held is not t:
                out.add(text_of(held))
    return out - {None}


def _part_of(text: str | None, names: set) -> bool:
    """A part of a graphed module: ``model.blocks``, ``imputer.est`` for ``model``, ``imputer``."""
    return text is not None and any(text.startswith(f"{name}.") for name in names)


def _graphed_names(targets) -> set:
    """What ``make_graphed_callables`` graphs, by name: ``model``, ``self.enc``, and the lists spread or
    converted into its tuple (``tuple(blocks) + (head,)``, ``(stem, *layers)``)."""
    names = {text_of(t) for t in targets} - {None}
    for target in targets:
        calls = {id(n.func) for n in ast.walk(target) if type(n) is ast.Call}
        names |= {n.id for n in ast.walk(target) if type(n) is ast.Name and id(n) not in calls}
        names |= {text_of(n) for n in ast.walk(target)  # ``tuple(model.blocks)``, ``(self.embed, *self.blocks)``
                  if type(n) is ast.Attribute and id(n) not in calls and text_of(n) is not None}
    return names


def _container(expr, facts=None, line: int = 0):
    """``blocks[0]`` -> ``blocks``, or ``layer`` in ``for layer in blocks:`` -> ``blocks``: a hook on one
    module of a list that is graphed."""
    while type(expr) is ast.Subscript:
        expr = expr.value
    if facts is not None and type(expr) is ast.Name:
        loops = [s for s in facts.stores if s.name == expr.id and s.loop_target
                 and s.node.lineno <= line <= s.node.end_lineno and getattr(s.node, "iter", None) is not None]
        if loops:
            it = loops[-1].node.iter
            if type(it) is ast.Call and type(it.func) is ast.Name and it.func.id in ("enumerate", "reversed") and it.args:
                it = it.args[0]  # ``for i, blk in enumerate(model.blocks)``
            return _container(it)
    return expr


@RULES.rule(
    Rule(
        code="CG511",
        name="graphed-callable-keywords",
        category="api-misuse",
        message="`{what}(...)` passes keyword arguments ({keywords}) to a callable graphed by "
        "`torch.cuda.make_graphed_callables`: graphed callables take positional tensors only, so the call raises TypeError",
        fix="Pass the inputs positionally, in the order of the `sample_args` the callable was graphed with.",
        compile=None,
        what="Checks for calls with keyword arguments of what `torch.cuda.make_graphed_callables` returns, "
        "and of the modules it graphed in place, in the function that graphs them, in the callers it returns "
        "them to (whole, or as elements and slices: `graphed[1:-1]`), in the functions they are passed to, "
        "through the loops over them, and in the methods of the model whose parts were graphed "
        "(`tuple(model.blocks)`, then `blk(x, bias=b)` in its `forward`).",
        why="torch wraps each graphed callable in a function that takes `*args` only, and a graphed "
        "module's new `forward` hands its keyword arguments to that function (while the module is in the "
        "training mode it was graphed in), so any keyword argument raises TypeError. Transformer Engine's "
        "`make_graphed_callables` is different: it takes `sample_kwargs` and is not checked here.",
        example=code("""
            import torch

            model = torch.nn.Linear(8, 8).cuda()
            x = torch.randn(4, 8, device="cuda", requires_grad=True)
            graphed = torch.cuda.make_graphed_callables(model, (x,))
            y = graphed(input=x)
        """),
        use_instead=code("""
            import torch

            model = torch.nn.Linear(8, 8).cuda()
            x = torch.randn(4, 8, device="cuda", requires_grad=True)
            graphed = torch.cuda.make_graphed_callables(model, (x,))
            y = graphed(x)
            y.sum().backward()
        """),
        fails_with="TypeError",
    ),
    Region(),
)
def graphed_callable_keywords(region, ctx):
    if not _manual(region) or region.kind != "make_graphed_callables":
        return
    project = ctx.project
    sf = facts_of(project, region.scope)
    graphed = _graphed_names(region.targets) | _bound_to(sf, region.node)
    # The graphing function, then the callers it returns the callables to (and theirs, three deep).
    todo, seen = [(sf, graphed, region.stmt.end_lineno, 0)], set()
    todo += _script_functions(region, graphed, project)
    for facts, names, after, depth in _graphed_visits(region, sf, todo, seen, project):
        yield from _keyword_calls(facts, names, after, project, passed_on=True)
        todo += _handed_back(facts, names, depth, region, sf, project)
    yield from _keyword_calls_on_self(region, sf, project)
    yield from _keyword_calls_in_owner(region, sf, project)


def _graphed_visits(region, sf, todo: list, seen: set, project):
    """The functions to look at for calls of graphed callables, as (facts, names, after, depth): those in
    ``todo`` (which the caller may extend while iterating), each once, with the names the callables go by
    there (``for layer in layers``, ``g[1:-1]``); then the file's uncalled functions that take them under
    one of those names."""
    walked: set = set()
    receivers_added = False
    while todo or not receivers_added:
        if not todo:
            todo.extend(_same_name_receivers(region.module, walked, seen, project))
            receivers_added = True
            continue
        facts, names, after, depth = todo.pop()
        if not names or (facts.fref.key, after) in seen:
            continue
        seen.add((facts.fref.key, after))
        names = _graphed_aliases(facts, names, facts.self_name, sf.self_name)
        walked |= {n for n in names if n.isidentifier()}
        yield facts, names, after, depth


def _same_name_receivers(module, names: set, seen: set, project) -> list:
    """The file's functions that no call in view reaches and that take a parameter named as the graphed
    callables are named where they were followed (``def eval_step(graphed, x)`` beside ``graphed =
    make_graphed_callables(...)``), when nothing else in the file is bound to that name. (facts, names,
    after, depth) to visit."""
    visited = {key for key, _after in seen}
    out = []
    for name, node in module.defs.items():
        fref = FuncRef(module, node, None, name)
        if fref.key in visited or next(call_sites(project, name, fref), None) is not None:
            continue
        params = {p for p in set(fref.positional_params) & names if not _bound_elsewhere(module, p, visited, project)}
        if params:
            out.append((facts_of(project, fref), params, 0, 3))
    return out


def _bound_elsewhere(module, name: str, visited: set, project) -> bool:
    """``name`` is assigned in a function of the file the walk did not follow (so it may hold anything)."""
    for fref in functions_of(module):
        if fref.key not in visited and any(s.name == name for s in facts_of(project, fref).stores):
            return True
    return False


def _script_functions(region, graphed: set, project) -> list:
    """Graphed at the top of a script: its functions use the globals. (facts, names, after, depth) to visit."""
    if type(region.scope.node) is not ast.Module:
        return []
    plain = {g for g in graphed if g.isidentifier()}
    return [(facts_of(project, FuncRef(region.module, node, None, name)), plain, 0, 3)
            for name, node in region.module.defs.items()]


def _keyword_calls_in_owner(region, sf, project):
    """Modules graphed in place from a part of one of the file's models (``make_graphed_callables(tuple(
    model.blocks), ...)``): the model's own methods call them (``for blk in self.blocks: blk(x, bias=b)``)."""
    for target in region.targets:
        if type(target) is not ast.Attribute or type(target.value) is not ast.Name:
            continue
        kind = sf.infer(target.value)
        if type(kind) is not tuple or kind[0] != "inst" or not kind[1].is_module(project):
            continue
        cls = kind[1]
        for name, node in cls.methods.items():
            facts = facts_of(project, FuncRef(cls.module, node, cls, name))
            if facts.self_name and facts is not sf:
                names = _graphed_aliases(facts, {f"{facts.self_name}.{target.attr}"}, facts.self_name, facts.self_name)
                yield from _keyword_calls(facts, names, 0, project, passed_on=False)


@RULES.rule(
    Rule(
        code="CG513",
        name="graphed-sample-args-not-tensors",
        category="api-misuse",
        message="sample input `{what}` given to `{api}` is not a tensor: graphing refuses anything but tensors ({error})",
        fix="Pass a tensor instead (`torch.tensor({what}, device=\"cuda\")`) and call the graphed callable with it; a "
        "setting that never changes belongs out of the inputs (a default argument, `functools.partial`).",
        compile=None,
        what="Checks the sample inputs written out in a `torch.cuda.make_graphed_callables` or "
        "`te.make_graphed_callables` call for Python numbers, strings, booleans and `None`.",
        why="Both functions flatten each callable's sample inputs and refuse any leaf that is not a tensor, "
        "before anything is captured: torch 2.11 raises AssertionError, Transformer Engine 2.20 TypeError, with "
        "\"In the beta API, sample_args for each callable must contain only Tensors\" (torch/cuda/graphs.py, "
        "transformer_engine/pytorch/graph.py). A graph replays on fixed buffers, so a number has to live in a "
        "tensor to be an input at all.",
        example=code("""
            import torch

            def calibrate(logits, temperature):
                return logits / temperature

            x = torch.randn(8, 4, device="cuda", requires_grad=True)
            graphed = torch.cuda.make_graphed_callables(calibrate, (x, 1.5))
        """),
        use_instead=code("""
            import torch

            def calibrate(logits, temperature):
                return logits / temperature

            x = torch.randn(8, 4, device="cuda", requires_grad=True)
            t = torch.tensor(1.5, device="cuda")
            graphed = torch.cuda.make_graphed_callables(calibrate, (x, t))
            y = graphed(x, t)
        """),
        gpu_check="ok = torch.allclose(y, x / 1.5)",
        fails_with="AssertionError",
    ),
    Region(),
)
def graphed_sample_args_not_tensors(region, ctx):
    if not _manual(region) or region.kind not in _GRAPHED_CALLABLES:
        return
    call = region.node
    samples = call.args[1] if len(call.args) > 1 else next((kw.value for kw in call.keywords if kw.arg == "sample_args"), None)
    if samples is None:
        return
    error = "AssertionError" if region.kind == "make_graphed_callables" else "TypeError"
    for leaf in _written_leaves(samples):
        if type(leaf) is ast.Constant:  # a number, string, bool or None: each a leaf that is no tensor
            yield found(leaf, what=repr(leaf.value), api=region.kind, error=error)


def _written_leaves(expr):
    """The leaves of a tuple or list written out (``(x, 1.5)``, ``((a,), (b, None))``)."""
    if type(expr) in (ast.Tuple, ast.List):
        for element in expr.elts:
            yield from _written_leaves(element)
    else:
        yield expr


def _keyword_calls_on_self(region, sf, project):
    """``self.cross_g, self.deep_g = make_graphed_callables(...)``: keyword calls of those attributes in
    the class's other methods (``self.deep_g(x0, field_mask=m)``)."""
    stmt = region.stmt
    if sf.cls is None or not sf.self_name or type(stmt) is not ast.Assign or stmt.value is not region.node:
        return
    attrs = {t.attr for t in ast.walk(stmt.targets[0]) if type(t) is ast.Attribute and type(t.value) is ast.Name
             and t.value.id == sf.self_name}
    for name, node in sf.cls.methods.items() if attrs else ():
        facts = facts_of(project, FuncRef(sf.cls.module, node, sf.cls, name))
        for c in facts.calls:
            func = c.node.func
            if type(func) is ast.Attribute and func.attr in attrs and type(func.value) is ast.Name \
                    and func.value.id == facts.self_name and not (facts is sf and c.node.lineno <= stmt.end_lineno):
                keywords = [kw.arg for kw in c.node.keywords if kw.arg is not None]
                if keywords:
                    yield found(c.node, module=facts.module, what=text_of(func),
                                keywords=", ".join(f"`{k}=`" for k in keywords))


def _bound_to(facts, call) -> set:
    """The names a call's result is assigned to (``g = ...``, ``enc, dec = ...``)."""
    for s in facts.stores:
        if type(s.node) is ast.Assign and s.node.value is call:
            return {n.id for n in ast.walk(s.node.targets[0]) if type(n) is ast.Name}
    return set()


def _keyword_calls(facts, names: set, after: int, project, passed_on: bool):
    """Calls of ``names`` with keyword arguments below line ``after``; with ``passed_on``, also in the
    file's functions they are handed to positionally (``fit(graphed, loader)``)."""
    for c in facts.calls:
        func = c.node.func
        if c.node.lineno <= after:
            continue
        called = text_of(func.value if type(func) is ast.Subscript else func)  # ``blocks[-1](x, attn_mask=m)``
        if called in names:
            keywords = [kw.arg for kw in c.node.keywords if kw.arg is not None]
            if keywords:
                yield found(c.node, module=facts.module, what=text_of(func) or called,
                            keywords=", ".join(f"`{k}=`" for k in keywords))
            continue
        if type(func) is not ast.Name:
            continue
        passed = [i for i, a in enumerate(c.node.args) if type(a) is ast.Name and a.id in names]
        node = facts.module.defs.get(func.id) if passed and passed_on else None
        if node is not None:
            target = FuncRef(facts.module, node, None, func.id)
            params = target.positional_params
            inner = {params[i] for i in passed if i < len(params)}
            yield from _keyword_calls(facts_of(project, target), inner, 0, project, passed_on=False)


@RULES.rule(
    Rule(
        code="CG512",
        name="weight-caching-without-first-microbatch",
        category="api-misuse",
        message="`{what}(...)` is a callable graphed by Transformer Engine with `{option}=True` and is called "
        "without `is_first_microbatch=`: the call raises ValueError",
        fix="Pass `is_first_microbatch=True` on the first micro-batch of each step and `False` on the others "
        "(on every call, inference too), or graph without `{option}`.",
        compile=None,
        what="Checks for calls without an `is_first_microbatch=` keyword of what Transformer Engine's "
        "`make_graphed_callables` returns when it was given `cache_quantized_params=True` (or the deprecated "
        "`fp8_weight_caching=True`), and of the modules it graphed in place: in the function that graphs them, "
        "in the other methods of its class, and in the callers it returns them to.",
        why="With weight caching, each replay must be told whether to quantize the weights again (the first "
        "micro-batch of a step) or reuse the cached copy. Transformer Engine 2.20.2 checks this on every call "
        "of a graphed callable (`transformer_engine/pytorch/graph.py`, `functionalized`): without a boolean "
        "`is_first_microbatch` keyword it raises ValueError (\"`is_first_microbatch` boolean kwarg must be "
        "provided for FP8 weight caching.\"). Measured on an H200 with Transformer Engine 2.20.2 "
        "(benchmarks/te_weight_caching.py): a TE layer and a plain torch head graphed in one call both raise "
        "it, in bf16 and with FP8, and so does the graphed module called directly; a graphed module runs the "
        "graph (and so the check) while it is in the training mode it was graphed in, and after `.eval()` it "
        "runs its own forward.",
        example=code("""
            import torch
            import transformer_engine.pytorch as te

            layer = te.Linear(64, 64).cuda()
            x = torch.randn(16, 64, device="cuda", requires_grad=True)
            graphed = te.make_graphed_callables(layer, (x,), cache_quantized_params=True)
            y = graphed(x)
        """),
        use_instead=code("""
            import torch
            import transformer_engine.pytorch as te

            layer = te.Linear(64, 64).cuda()
            x = torch.randn(16, 64, device="cuda", requires_grad=True)
            graphed = te.make_graphed_callables(layer, (x,), cache_quantized_params=True)
            y = graphed(x, is_first_microbatch=True)
        """),
        gpu_skip="needs Transformer Engine on the device: measured by benchmarks/te_weight_caching.py "
        "(benchmarks/h200-2026-12-01-te-caching) after scripts/device_te_setup.sh",
        fails_with="ValueError",
        trace=None,
        trace_blind="the graphed callables are Transformer Engine's, called after the capture",
    ),
    Region(),
)
def weight_caching_without_first_microbatch(region, ctx):
    if not _manual(region) or region.kind != "te.make_graphed_callables":
        return
    option = next((kw.arg for kw in region.node.keywords
                   if kw.arg in ("cache_quantized_params", "fp8_weight_caching") and is_true(kw.value)), None)
    if option is None:
        return
    project = ctx.project
    sf = facts_of(project, region.scope)
    returned = _bound_to(sf, region.node) | _kept_on_self(sf, region.node, {None: "<graphed>"})  # ``self.g = mgc(...)``
    in_place = {text_of(t) for t in region.targets if is_callable_module(sf.infer(t), project)}
    in_place |= {text_of(n) for t in region.targets for n in ast.walk(t)  # ``tuple(self.layers) + (self.head,)``
                 if type(n) is ast.Attribute and type(n.value) is ast.Name and n.value.id == sf.self_name}
    graphed = _graphed_aliases(sf, returned | in_place, sf.self_name, sf.self_name)
    todo, seen = [(sf, graphed, region.stmt.end_lineno, 0)], set()
    if sf.cls is not None and sf.self_name:
        attrs = {g for g in graphed if g.startswith(f"{sf.self_name}.")}
        for name, node in sf.cls.methods.items():
            if node is not region.scope.node and attrs:
                todo.append((facts_of(project, FuncRef(sf.cls.module, node, sf.cls, name)), attrs, 0, 3))
    todo += _script_functions(region, graphed, project)
    reported = set()
    for facts, names, after, depth in _graphed_visits(region, sf, todo, seen, project):
        if not any(c.meth in ("eval",) or (c.meth == "train" and c.node.args and is_false(c.node.args[0]))
                   for c in facts.calls):  # after ``.eval()`` a graphed module runs its own forward
            for c in facts.calls:
                if c.node.lineno > after and text_of(c.node.func) in names and id(c.node) not in reported \
                        and not any(kw.arg == "is_first_microbatch" or kw.arg is None for kw in c.node.keywords):
                    reported.add(id(c.node))
                    yield found(c.node, module=facts.module, what=text_of(c.node.func), option=option)
        for c in facts.calls if depth < 3 else ():  # ``nightly_scores(graphed, recipe, batches)``: handed on
            func = c.node.func
            passed = [i for i, a in enumerate(c.node.args) if type(a) is ast.Name and a.id in names]
            node = facts.module.defs.get(func.id) if passed and type(func) is ast.Name else None
            if node is not None:
                target = FuncRef(facts.module, node, None, func.id)
                params = target.positional_params
                todo.append((facts_of(project, target), {params[i] for i in passed if i < len(params)}, 0, depth + 1))
        todo += _handed_back(facts, names, depth, region, sf, project)


def _handed_back(facts, names: set, depth: int, region, sf, project) -> list:
    """Where a function returns graphed callables to (``return list(layers), noise``; ``return
    make_graphed_callables(...)``): its callers, under the names they bind them to (``g_cnn, g_head =
    build()``), and the methods of a caller's class when it keeps them on ``self`` (``self.layers, self.noise
    = Builder(trunk).build(x)``), three calls deep. (facts, names, after, depth) to visit."""
    fn = facts.fref.node
    if depth >= 3 or type(fn) is ast.Module:
        return []
    returned = returned_positions(fn, {n for n in names if n.isidentifier()})
    if facts is sf and any(type(n) is ast.Return and n.value is region.node for n in ast.walk(fn)):
        returned[None] = "<graphed>"  # ``return torch.cuda.make_graphed_callables(policy, ...)``
    out = []
    for caller, call in call_sites(project, facts.fref.name, facts.fref) if returned else ():
        cf = facts_of(project, caller)
        bound = bound_from(cf, call, returned)
        if not bound and None in returned:  # ``g_cnn, g_head = build()`` of ``return make_graphed_callables((cnn, head), ...)``
            bound = _bound_to(cf, call)
        out.append((cf, bound, call.lineno, depth + 1))
        kept = _kept_on_self(cf, call, returned)
        for name, node in cf.cls.methods.items() if kept else ():
            if node is not caller.node:
                out.append((facts_of(project, FuncRef(cf.cls.module, node, cf.cls, name)), kept, 0, depth + 1))
    return out


def _kept_on_self(facts, call, positions: dict) -> set:
    """The attributes of ``self`` that take the returned values (``self.layers, self.noise = b.build()``)."""
    if facts.cls is None or not facts.self_name:
        return set()
    for s in facts.self_stores:
        stmt = s.stmt
        if type(stmt) is ast.Assign and stmt.value is call:
            target = stmt.targets[0]
            parts = list(enumerate(target.elts)) if type(target) is ast.Tuple else [(None, target)]
            return {text_of(t) for i, t in parts if i in positions and type(t) is ast.Attribute
                    and type(t.value) is ast.Name and t.value.id == facts.self_name}
    return set()


def _graphed_aliases(facts, names: set, self_name, graphing_self) -> set:
    """``names`` as this function sees them (``self.`` of the graphing method read as this method's), with
    what they are unpacked, sliced or indexed into (``g_embed, *g_layers, g_head = graphed``,
    ``self.g_layers = graphed[:-1]``) and the loop variables that take their elements (``for layer in
    g_layers``, ``enumerate(self.g_layers)``)."""
    if self_name and graphing_self and self_name != graphing_self:
        names = {f"{self_name}.{n[len(graphing_self) + 1:]}" if n.startswith(f"{graphing_self}.") else n for n in names}
    out = set(names)
    for _ in range(3):
        grown = set(out)
        for node in ast.walk(facts.fref.node):
            if type(node) is ast.Assign:
                pairs = []
                for target in node.targets:
                    if type(target) in (ast.Tuple, ast.List) and type(node.value) in (ast.Tuple, ast.List) \
                            and len(target.elts) == len(node.value.elts):
                        pairs += list(zip(target.elts, node.value.elts, strict=True))
                    elif type(target) in (ast.Tuple, ast.List):
                        pairs += [(elt, node.value) for elt in target.elts]
                    else:
                        pairs.append((target, node.value))
                for target, value in pairs:
                    source = value.value if type(value) is ast.Subscript else value
                    if text_of(source) in out:
                        target = target.value if type(target) is ast.Starred else target
                        if text_of(target) is not None:
                            grown.add(text_of(target))
            elif type(node) in (ast.For, ast.comprehension):
                it = node.iter
                if type(it) is ast.Call and type(it.func) is ast.Name and it.func.id in ("enumerate", "reversed") and it.args:
                    it = it.args[0]
                if text_of(it) in out:
                    target = node.target
                    if type(target) is ast.Tuple and type(node.iter) is ast.Call and getattr(node.iter.func, "id", "") == "enumerate":
                        target = target.elts[-1]
                    if type(target) is ast.Name:
                        grown.add(target.id)
        if grown == out:
            break
        out = grown
    return out


def _ddp_constructions(region, ctx) -> list:
    """(facts, call) of every DistributedDataParallel(...) in a file that captures, once per file."""
    module = region.module
    if not _manual(region) or region.kind not in _CAPTURES or "DistributedDataParallel" not in module.text \
            or not _captures_backward(region):
        return []  # DDP's requirements are for capturing its backward (its all-reduce hooks)
    return [(f, c) for f, c in _calls_in_file(region, ctx) if c.qual == _DDP]


def _captures_backward(region) -> bool:
    """The captured code runs a backward pass (``loss.backward()``, ``torch.autograd.grad``), itself or in
    the functions it calls."""
    return any(lo <= c.node.lineno <= hi and (c.meth == "backward" or c.qual == "torch.autograd.grad")
               for facts, (lo, hi), _chain in region.reached for c in facts.calls)


@RULES.rule(
    Rule(
        code="CG504",
        name="ddp-default-stream",
        trace=None,
        trace_blind="needs an initialized NCCL process group (torchrun); a single-process trace does not start one",
        category="stream",
        message="DistributedDataParallel is constructed on the default stream in a file that captures graphs",
        fix="Construct DDP inside `with torch.cuda.stream(side_stream):` (the stream used for warm-up and capture).",
        compile=None,
        what="Checks for `DistributedDataParallel(...)` built outside a `torch.cuda.stream(...)` context "
        "in a file that captures with `torch.cuda.graph` or `capture_begin`.",
        why="DDP sets up its gradient-reduction machinery on the stream that is current when it is "
        "constructed. Built on the default stream, the gradient accumulation that a captured "
        "backward triggers touches the default stream, which is illegal during capture. PyTorch's "
        "notes on DDP with graphs ask for construction in a side-stream context, NCCL >= 2.9.6, "
        "at least 11 eager warm-up iterations and `TORCH_NCCL_ASYNC_ERROR_HANDLING=0`.",
        example=code("""
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            model = DDP(torch.nn.Linear(8, 8).cuda())
            x = torch.randn(4, 8, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                model(x).sum().backward()
        """),
        use_instead=code("""
            import os

            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0"
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                model = DDP(torch.nn.Linear(8, 8).cuda())
                x = torch.randn(4, 8, device="cuda")
                for _ in range(11):
                    model(x).sum().backward()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                model(x).sum().backward()
        """),
        gpu_skip="needs an initialized NCCL process group (torchrun); the single-process harness does not start one",
    ),
    Region(),
)
def ddp_default_stream(region, ctx):
    constructions = _ddp_constructions(region, ctx)
    if not constructions or not ctx.once(("CG504", id(region.module))):
        return
    for f, c in constructions:
        line = c.node.lineno
        if not any(w.lineno <= line <= w.end_lineno for w, _ in f.stream_withs):
            yield found(c.node)


@RULES.rule(
    Rule(
        code="CG505",
        name="ddp-short-warmup",
        trace=None,
        trace_blind="needs an initialized NCCL process group (torchrun); a single-process trace does not start one",
        category="api-misuse",
        message="warm-up of {what} iterations before capturing a DDP model; DDP needs at least 11",
        fix="Run at least 11 eager DDP iterations (on the side stream) before capture.",
        compile=None,
        what="Checks for warm-up loops of fewer than 11 iterations before a capture in a file that uses "
        "DistributedDataParallel.",
        why="DDP switches its internal mode (bucket rebuilding, static-graph detection) during the "
        "first iterations. Capturing before that settles records a reduction schedule that later "
        "changes. PyTorch's notes ask for at least 11 DDP-enabled eager iterations before capture.",
        example=code("""
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                model = DDP(torch.nn.Linear(8, 8).cuda())
                x = torch.randn(4, 8, device="cuda")
                for _ in range(3):
                    model(x).sum().backward()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                model(x).sum().backward()
        """),
        use_instead=code("""
            import os

            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0"
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                model = DDP(torch.nn.Linear(8, 8).cuda())
                x = torch.randn(4, 8, device="cuda")
                for _ in range(11):
                    model(x).sum().backward()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                model(x).sum().backward()
        """),
        gpu_skip="needs an initialized NCCL process group (torchrun); the single-process harness does not start one",
    ),
    Region(),
)
def ddp_short_warmup(region, ctx):
    if not _ddp_constructions(region, ctx) or not ctx.once(("CG505", id(region.module))):
        return
    sf = facts_of(ctx.project, region.scope)
    rs = region.stmt.lineno
    for loop in sf.loops:
        if loop.end_lineno < rs and type(loop) is ast.For:
            it = loop.iter
            if type(it) is ast.Call and type(it.func) is ast.Name and it.func.id == "range" and len(it.args) == 1:
                n = it.args[0]
                if type(n) is ast.Constant and isinstance(n.value, int) and n.value < 11:
                    yield found(loop, what=str(n.value))


@RULES.rule(
    Rule(
        code="CG506",
        name="ddp-async-error-handling",
        trace=None,
        trace_blind="reads the launch environment of a DDP job (torchrun); a single-process trace does not start one",
        category="api-misuse",
        message="DDP with CUDA graph capture, but `TORCH_NCCL_ASYNC_ERROR_HANDLING` is not set to 0 in this file",
        fix='Set `os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0"` before `init_process_group` (or in the launch environment).',
        manual="warning",
        compile=None,
        what="Checks that a file which captures a DDP model also disables NCCL asynchronous error handling; "
        "reported at `init_process_group` (the setting must come before it), or at the DDP construction when "
        "the file does not create the process group.",
        why="With asynchronous error handling on, the NCCL watchdog queries the work of collectives "
        "from another thread, which can invalidate a capture in progress. PyTorch's notes ask to "
        "set it to 0 for full-backward capture with DDP (the older name "
        "`NCCL_ASYNC_ERROR_HANDLING` still works but is deprecated). It may also be set in the "
        "launch environment, which this check cannot see.",
        example=code("""
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                model = DDP(torch.nn.Linear(8, 8).cuda())
                x = torch.randn(4, 8, device="cuda")
                for _ in range(11):
                    model(x).sum().backward()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                model(x).sum().backward()
        """),
        use_instead=code("""
            import os

            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0"
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                model = DDP(torch.nn.Linear(8, 8).cuda())
                x = torch.randn(4, 8, device="cuda")
                for _ in range(11):
                    model(x).sum().backward()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                model(x).sum().backward()
        """),
        gpu_skip="needs an initialized NCCL process group (torchrun); the single-process harness does not start one",
    ),
    Region(),
)
def ddp_async_error_handling(region, ctx):
    constructions = _ddp_constructions(region, ctx)
    if not constructions or "ASYNC_ERROR_HANDLING" in region.module.text or not ctx.once(("CG506", id(region.module))):
        return
    # The process group reads the variable when it is created: the setting belongs before
    # ``init_process_group``, reported there when the file makes the group, else at each DDP construction.
    groups = [c for f, c in _calls_in_file(region, ctx) if c.qual == "torch.distributed.init_process_group"]
    for c in groups or [c for _f, c in constructions]:
        yield found(c.node)


def _calls_in_file(region, ctx) -> list:
    """(facts, call) of every call of the file (its top level and functions), once per file."""
    module = region.module

    def compute():
        project = ctx.project
        facts_list = [module_facts(project, module)]
        facts_list += [facts_of(project, FuncRef(module, node, None, name)) for name, node in module.defs.items()]
        facts_list += [facts_of(project, FuncRef(module, node, cls, name))
                       for cls in module.classes.values() for name, node in cls.methods.items()]
        return [(f, c) for f in facts_list for c in f.calls]

    return ctx.memo(("calls in file", id(module)), compute)


@RULES.rule(
    Rule(
        code="CG507",
        name="compiled-fn-not-warmed-up",
        category="api-misuse",
        message="`{what}` is a `torch.compile`d function called inside manual capture before any warm-up call",
        fix="Call the compiled function (with the same shapes) at least once before capture, on the warm-up stream.",
        compile=None,
        what="Checks for calls to a `torch.compile`d function inside `torch.cuda.graph` / `capture_begin` "
        "when the function was not called before the capture.",
        why="The first call of a compiled function traces and compiles it: Python work, host-to-device "
        "copies of constants, autotuning and lazy initialization, none of which can be captured. "
        "Warming it up first leaves only kernel launches for the capture to record. Measured on an H200 with "
        "torch 2.11: with a fresh inductor cache the example fails (a CPU-to-CUDA copy during capture); run "
        "again with the cache an earlier run left, it captured, so such a script can pass on a developer's "
        "machine and fail on a fresh one.",
        example=code("""
            import torch

            scale = torch.compile(lambda t: t * 2)
            x = torch.randn(8, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = scale(x)
        """),
        use_instead=code("""
            import torch

            scale = torch.compile(lambda t: t * 2)
            x = torch.randn(8, device="cuda")
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    scale(x)  # compiles and warms up outside the capture
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = scale(x)
            g.replay()
        """),
    ),
    Region(),
)
def compiled_fn_not_warmed_up(region, ctx):
    """A compiled function called in the capture, never before it."""
    if not _manual(region) or region.kind not in _CAPTURES:
        return
    sf = facts_of(ctx.project, region.scope)
    start, end = region.span
    rs = region.stmt.lineno
    before = {text_of(o.node.func) for o in sf.calls if o.node.lineno < rs}  # what the capturing function ran first
    for facts, (lo, hi), _chain in region.reached:
        own = facts is sf
        if not own and (f"{sf.self_name}.{facts.fref.name}" in before or facts.fref.name in before):
            continue  # ``self._eps()`` run in the warm-up: its compiled calls compiled there
        for c in facts.calls:
            if (start <= c.node.lineno <= end) if own else (lo <= c.node.lineno <= hi):
                target = facts.infer(c.node.func)
                if type(target) is tuple and target[0] == "compiled":
                    name = text_of(c.node.func)
                    warmed = own and any(o.node.lineno < rs and text_of(o.node.func) == name for o in sf.calls if o.node is not c.node)
                    if not warmed and (own or name not in before):
                        yield found(c.node, module=facts.module, what=name)


@RULES.rule(
    Rule(
        code="CG508",
        name="capture-without-warmup",
        category="api-misuse",
        message="capture runs {what} with no warm-up on a side stream before it",
        fix="Before capturing, run a few iterations on a side stream (`s.wait_stream(...)`, "
        "`with torch.cuda.stream(s): ...`, then `torch.cuda.current_stream().wait_stream(s)`).",
        manual="warning",
        compile=None,
        what="Checks for a manual capture of model calls, backward or optimizer steps, or cuBLAS, cuDNN "
        "and cuSOLVER kernels (`a @ b`, `F.linear`, convolutions, `torch.linalg`), with no "
        "`with torch.cuda.stream(...)` warm-up before it. A callable handed to a capture helper, or "
        "run in a context-manager helper's capture, is reported at the helper's capture.",
        why="The first run of a model does one-time work: library handles and workspaces (cuBLAS, "
        "cuDNN), allocator growth, lazy module initialization, optimizer state, autograd's gradient "
        "buffers. Done during capture, that work fails or is recorded as if it were part of every "
        "step. Measured on torch 2.11 (H200, benchmarks/cold_capture.py), each captured in a fresh "
        "process with nothing run before: a matmul, `F.linear`, an `nn.Linear`, a convolution, "
        "`torch.linalg.solve` and an MLP's forward and backward all failed (\"operation failed due to a "
        "previous error during capture\"); elementwise code and a GRU forward captured and replayed "
        "correctly. Warming up on a side stream also keeps the default stream out of the capture.",
        example=code("""
            import torch

            model = torch.nn.Linear(8, 8).cuda()
            x = torch.randn(4, 8, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                loss = model(x).sum()
                loss.backward()
        """),
        use_instead=code("""
            import torch

            model = torch.nn.Linear(8, 8).cuda()
            x = torch.randn(4, 8, device="cuda")
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    model(x).sum().backward()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                loss = model(x).sum()
                loss.backward()
            g.replay()
        """),
    ),
    Region(),
)
def capture_without_warmup(region, ctx):
    """Nothing that needs warm-up may be captured cold."""
    if not _manual(region) or region.kind not in _CAPTURES:
        return
    project = ctx.project
    sf = facts_of(project, region.scope)
    start, end = region.span
    rs = region.stmt.lineno
    needs = None
    for c in sf.calls:
        if start <= c.node.lineno <= end:
            if c.meth == "backward":
                needs = "`backward()`"
                break
            if c.meth == "step" and type(c.recv) is tuple and c.recv[0] == "optim":
                needs = "an optimizer step"
                break
            if _callable_object(sf.infer(c.node.func), project) or _runs_a_module_forward(sf, c, ctx) \
                    or _module_by_use(sf, c.node.func) \
                    or _calls_what_needs_warmup(sf, c, ctx, forward_warmed=_ran_a_module_before(sf, rs, ctx)):
                name = text_of(c.node.func)
                # A forward-only capture is warmed up by any earlier call of the same module.
                if not any(o.node.lineno < rs and text_of(o.node.func) == name for o in sf.calls):
                    needs = needs or f"`{name}(...)`"
    if needs is None and not library_kernel(sf, 0, rs - 1) and not _ran_a_module_before(sf, rs, ctx):
        needs = library_kernel(sf, start, end)  # ``y = x @ w`` captured cold: cuBLAS sets up inside the capture
    if needs and not _warmed_up(sf, rs, ctx, opener=region.node, captured=(rs, end)) \
            and not _callers_warm_up(region, ctx):
        helper_capture = _helper_capture(sf, region.node, ctx)
        if helper_capture is None:
            yield found(region.node, what=needs)
        else:  # ``with graph_capture() as g: ...``: the helper's ``torch.cuda.graph`` captures it
            module, call = helper_capture
            yield found(call, module=module, what=f"{needs} (the `with` block at {sf.module.path}:{rs})")


def _helper_capture(facts, opener, ctx):
    """``(module, call)`` of the ``torch.cuda.graph(...)`` that a context-manager helper opens around its
    ``yield``, when ``opener`` calls such a helper; None otherwise."""
    call = next((c for c in facts.calls if c.node is opener), None)
    if call is None:
        return None
    for target in ctx.resolve(facts, call):
        if type(target.node) is ast.Module:
            continue
        for node in ast.walk(target.node):
            if type(node) not in (ast.With, ast.AsyncWith) or not any(type(n) is ast.Yield for n in ast.walk(node)):
                continue
            for item in node.items:
                expr = item.context_expr
                if type(expr) is ast.Call and target.module.qual(expr.func) == "torch.cuda.graph":
                    return target.module, expr
    return None


@RULES.also("CG508", Region())
def passed_callable_without_warmup(region, ctx):
    """A callable handed to a capture helper that neither the helper nor the caller ran before."""
    for passed in region.passed:
        if passed.warmed_up:
            continue
        needs = _needs_warmup(facts_of(ctx.project, passed.target), ctx.project)
        if needs and passed.helper.startswith("@"):  # a capturing decorator: its one capture is the site
            if ctx.once(("cold decorator", id(region))):
                yield found(region.node, what=f"`{passed.target.display}` (decorated with `{passed.helper}`), which runs {needs},")
        elif needs:  # at the helper's capture, where a warm-up of the callable it is given belongs
            where = f"L{passed.call.lineno}" if passed.caller.module is region.module else \
                f"{passed.caller.module.path}:{passed.call.lineno}"
            what = f"`{passed.target.display}` (passed to `{passed.helper}` at {where}), which runs {needs},"
            helper_capture = _helper_capture(facts_of(ctx.project, region.scope), region.node, ctx) \
                if region.scope is not None else None
            if helper_capture is None:
                yield found(region.node, what=what)
            else:  # ``with captured() as g:`` in the helper: the context manager's graph captures it
                yield found(helper_capture[1], module=helper_capture[0], what=what)


def _runs_a_module_forward(facts, call, ctx) -> bool:
    """``self.model(x)`` of an untyped model that the checker follows into the file's modules."""
    if type(call.node.func) not in (ast.Name, ast.Attribute):
        return False
    return any(t.name == "forward" and t.cls is not None and t.cls.is_module(ctx.project) for t in ctx.resolve(facts, call))


def _calls_what_needs_warmup(facts, call, ctx, forward_warmed: bool) -> bool:
    """``fn(self, static_x)`` in a capturing decorator, ``self._step()`` in a runner: a function of the
    project that runs a backward or an optimizer step, or a module when no module ran before the capture
    (``forward_warmed``: an eager forward before it warms a forward-only capture)."""
    if type(call.node.func) not in (ast.Name, ast.Attribute):
        return False
    for target in ctx.resolve(facts, call):
        needs = _needs_warmup(facts_of(ctx.project, target), ctx.project, ctx)
        if needs and not (forward_warmed and needs.startswith("`") and needs != "`backward()`"):
            return True
    return False


def _ran_a_module_before(facts, line: int, ctx) -> bool:
    """A module (or a function running one) was called before ``line``: an eager forward."""
    return any(c.node.lineno < line and (_callable_object(facts.infer(c.node.func), ctx.project)
                                         or _runs_a_module_forward(facts, c, ctx)) for c in facts.calls)


def _needs_warmup(facts, project, ctx=None) -> str | None:
    """What in a function needs a warm-up run before capture: a backward, an optimizer step, a
    module (with ``ctx``, also a model of unknown type that the checker follows into the file's
    modules), or a cuBLAS, cuDNN or cuSOLVER kernel."""
    for c in facts.calls:
        if c.meth == "backward":
            return "`backward()`"
        if c.meth == "step" and type(c.recv) is tuple and c.recv[0] == "optim":
            return "an optimizer step"
    for c in facts.calls:
        if is_callable_module(facts.infer(c.node.func), project) or (ctx is not None and _runs_a_module_forward(facts, c, ctx)) \
                or _module_by_use(facts, c.node.func):
            return f"`{text_of(c.node.func)}(...)`"
    return library_kernel(facts)


_MODULE_ONLY_METHODS = frozenset({"eval", "train", "parameters", "named_parameters", "modules", "named_modules",
                                  "requires_grad_", "state_dict", "load_state_dict"})


def _module_by_use(facts, func) -> bool:
    """``self.base_classifier(x)`` of an untyped object that the class also calls ``.eval()`` (or
    ``.parameters()``, ``.train()``) on, or stores as such (``self.model = model.eval()``): a torch module,
    whose first run needs warming up."""
    if type(func) is not ast.Attribute or type(func.value) is not ast.Name or func.value.id != facts.self_name \
            or facts.cls is None:
        return False
    for node in ast.walk(facts.cls.node):
        if type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr in _MODULE_ONLY_METHODS:
            owner = node.func.value
            if type(owner) is ast.Attribute and owner.attr == func.attr and type(owner.value) is ast.Name \
                    and owner.value.id == facts.self_name:
                return True
        if type(node) is ast.Assign:
            for target, value in _assigned_pairs(node):
                if type(target) is ast.Attribute and target.attr == func.attr and type(target.value) is ast.Name \
                        and target.value.id == facts.self_name and type(value) is ast.Call \
                        and type(value.func) is ast.Attribute and value.func.attr in ("eval", "train"):
                    return True
    return False


def _assigned_pairs(stmt):
    """(target, value) of ``a = x`` and of each element of ``a, b = x, y``."""
    for target in stmt.targets:
        if type(target) is ast.Tuple and type(stmt.value) is ast.Tuple and len(target.elts) == len(stmt.value.elts):
            yield from zip(target.elts, stmt.value.elts, strict=True)
        else:
            yield target, stmt.value


# Library kernels whose first call in a process sets up a handle or a workspace (cuBLAS, cuDNN,
# cuSOLVER): measured on torch 2.11 (benchmarks/cold_capture.py), captured with no run before, a
# matmul, F.linear, a convolution and linalg.solve fail the capture.
_LIBRARY_KERNELS = frozenset({
    "torch.matmul", "torch.mm", "torch.bmm", "torch.addmm", "torch.baddbmm", "torch.addbmm", "torch.einsum",
    "torch.nn.functional.linear", "torch.nn.functional.bilinear", "torch.nn.functional.conv1d",
    "torch.nn.functional.conv2d", "torch.nn.functional.conv3d", "torch.nn.functional.conv_transpose1d",
    "torch.nn.functional.conv_transpose2d", "torch.nn.functional.conv_transpose3d",
})
_LIBRARY_METHODS = frozenset({"matmul", "mm", "bmm", "addmm", "baddbmm"})


def library_kernel(facts, lo: int = 0, hi: int = 1 << 30) -> str | None:
    """The first cuBLAS, cuDNN or cuSOLVER kernel a function runs between lines ``lo`` and ``hi``:
    ``a @ b``, ``torch.matmul``, ``F.linear``, ``F.conv2d``, ``torch.linalg.solve``, ``x.mm(w)``."""
    for c in facts.calls:
        if lo <= c.node.lineno <= hi:
            qual = c.qual or ""
            if qual in _LIBRARY_KERNELS or qual.startswith("torch.linalg."):
                return f"`{text_of(c.node.func)}(...)`"
            if c.meth in _LIBRARY_METHODS and type(c.recv) is not tuple:
                return f"`{text_of(c.node.func)}(...)`"
    node = facts.fref.node
    for n in ast.walk(node):
        if type(n) is ast.BinOp and type(n.op) is ast.MatMult and lo <= n.lineno <= hi:
            return f"`{text_of(n)}`"
    return None


def _callable_object(kind, project) -> bool:
    """A module, or an object of a project class with ``__call__`` (a sampler, a runner): its first
    call does the same one-time work a model's does."""
    if is_callable_module(kind, project):
        return True
    return type(kind) is tuple and kind[0] == "inst" and kind[1].find_method("__call__", project) is not None


def _callers_warm_up(region, ctx) -> bool:
    """A capturing helper (``def _capture(self, size)``) whose every caller in view warms up on a side
    stream before calling it (``build()``: warm-up, then ``self._capture(size)``); or a method whose
    class's constructor warms up on a side stream (it runs before any method can)."""
    scope = region.scope
    if scope is None or type(scope.node) is ast.Module:
        return False
    init = scope.cls.methods.get("__init__") if scope.cls is not None and scope.name != "__init__" else None
    if init is not None and facts_of(ctx.project, FuncRef(scope.cls.module, init, scope.cls, "__init__")).stream_withs:
        return True
    callers = list(call_sites(ctx.project, scope.name, scope))
    return bool(callers) and all(_warms_up_itself(facts_of(ctx.project, caller), call.lineno) for caller, call in callers)


def _warms_up_itself(facts, line: int) -> bool:
    """The function runs a ``with torch.cuda.stream(...)`` block before ``line`` (or in a loop around it)."""
    loops = [(lp.lineno, lp.end_lineno) for lp in facts.loops if lp.lineno <= line <= lp.end_lineno]
    return any(w.end_lineno < line or any(lo <= w.lineno <= hi for lo, hi in loops) for w, _ in facts.stream_withs)


def _warmed_up(sf, before_line: int, ctx, opener=None, captured=None) -> bool:
    """A side-stream warm-up before the capture: in the capturing function, in a function it calls
    before, or in the helper that opens the capture (``with graph_capture(pool, warmup_fn=...)``).
    ``captured``: the lines of the capture itself, which warm nothing up."""
    # In a loop around the capture, what the loop runs below it ran on the earlier iterations
    # (``if epoch == 1: capture`` after an eager epoch 0 on a side stream).
    loops = [(lp.lineno, lp.end_lineno) for lp in sf.loops if lp.lineno <= before_line <= lp.end_lineno]
    first, last = captured or (before_line, before_line)

    def earlier(line: int) -> bool:
        if first <= line <= last:
            return False
        return line < before_line or any(lo <= line <= hi for lo, hi in loops)

    if any(earlier(w.lineno) and not (w.lineno <= before_line <= w.end_lineno) for w, _ in sf.stream_withs):
        return True
    for c in sf.calls:
        own = c.meth is None or (type(c.node.func.value) is ast.Name and c.node.func.value.id == sf.self_name)
        if c.node is opener or (earlier(c.node.lineno) and c.node.lineno != before_line and own):
            for target in ctx.resolve(sf, c):
                if any(_runs_before_yield(w) for w, _ in facts_of(ctx.project, target).stream_withs):
                    return True
    return False


def _runs_before_yield(stream_with) -> bool:
    """A side-stream block that runs something before it hands over: not a helper's ``with
    torch.cuda.stream(s): with torch.cuda.graph(g): yield g``, which only captures on that stream."""
    for stmt in stream_with.body:
        if any(type(n) in (ast.Yield, ast.YieldFrom) for n in ast.walk(stmt)):
            return False
        if type(stmt) is not ast.Pass:
            return True
    return True


@RULES.rule(
    Rule(
        code="CG509",
        name="graph-object-reused",
        category="api-misuse",
        message="`{what}` is captured into again without being reset (first capture at L{line})",
        fix="Create a new `torch.cuda.CUDAGraph()` for each capture, or call `{what}.reset()` before capturing again.",
        compile=None,
        what="Checks for a `CUDAGraph` object captured twice (two `torch.cuda.graph(g)` blocks, or one "
        "inside a loop, or a `self.graph` made once and captured by a method its class calls again, also "
        "under a test that holds again for a new input: `if x.shape[1] != self.x.shape[1]: self.build(...)` in "
        "the method that replays) without `reset()` or a new object in between.",
        why="A `CUDAGraph` holds one captured graph. Capturing into an object that already owns one is "
        "an error; capturing in a loop also re-records work each iteration, which defeats the purpose "
        "of a graph.",
        example=code("""
            import torch

            x = torch.randn(8, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x * 2
            with torch.cuda.graph(g):
                z = x + 1
        """),
        use_instead=code("""
            import torch

            x = torch.randn(8, device="cuda")
            g1 = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g1):
                y = x * 2
            g2 = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g2, pool=g1.pool()):
                z = x + 1
            g1.replay()
            g2.replay()
        """),
    ),
    Region(),
)
def graph_object_reused(region, ctx):
    """The same graph object captured twice."""
    if not _manual(region) or region.kind not in _CAPTURES:
        return
    graph = region.graph_expr
    sf = facts_of(ctx.project, region.scope)
    if type(graph) is ast.Name:
        name = graph.id
        stores = [s.node.lineno for s in sf.stores if s.name == name]
    elif type(graph) is ast.Attribute and type(graph.value) is ast.Name and graph.value.id == sf.self_name:
        name = text_of(graph)  # ``self.graph``, captured again for each bucket of a loop
        stores = [s.stmt.lineno for s in sf.self_stores if s.attr == graph.attr]
    else:
        return
    rs = region.stmt.lineno
    earlier = [r for r in ctx.regions_in_scope(region) if r is not region and r.stmt.lineno < rs]
    for other in earlier:
        if text_of(other.graph_expr) == name and not _exclusive(other, region):
            if not any(other.stmt.lineno < line < rs for line in stores) and not _reset_between(
                    sf, name, other.stmt.lineno, rs):
                yield found(graph, what=name, line=other.stmt.lineno)
                return
    for i, anc in enumerate(region.ancestors):
        if type(anc) in (ast.For, ast.While, ast.AsyncFor):
            if any(type(inner) is ast.If for inner in region.ancestors[i + 1:]):
                continue  # ``if epoch == 1:`` / ``if self.graph is None:`` in the loop: captured once, or unknown
            if not any(anc.lineno <= line <= anc.end_lineno for line in stores) and not _reset_between(
                sf, name, anc.lineno, anc.end_lineno + 1
            ):
                yield found(graph, what=name, line=rs)
                return
    if type(graph) is ast.Attribute and not stores and not _reset_between(sf, name, 0, 1 << 30):
        # ``self.graph`` made once (in ``__init__``) and captured by a method the class runs again
        # (``switch_vehicle()`` calls ``capture()`` a second time)
        scope = region.scope
        sites = [(fref, call) for fref, call in call_sites(ctx.project, scope.name, scope)
                 if fref.module is region.module and type(call.func) is ast.Attribute and type(call.func.value) is ast.Name]
        again = [fref for fref, _call in sites if fref.cls is scope.cls and fref.name != "__init__"]
        if (len(sites) >= 2 and again) or any(_recaptures_on_change(fref, call, graph.attr) for fref, call in sites
                                              if fref.cls is scope.cls and fref.name != "__init__"):
            yield found(graph, what=name, line=rs)


def _recaptures_on_change(fref, call, graph_attr: str) -> bool:
    """The method that replays ``self.<graph_attr>`` calls the capturing method under an ``if`` that holds
    again after the first time (``if not hasattr(self, "x") or x.shape[1] != self.x.shape[1]:``): a new
    shape captures into the graph a second time."""
    fn = fref.node
    replays = any(type(n) is ast.Call and type(n.func) is ast.Attribute and n.func.attr == "replay"
                  and type(n.func.value) is ast.Attribute and n.func.value.attr == graph_attr for n in ast.walk(fn))
    renewed = any((type(n) is ast.Call and type(n.func) is ast.Attribute and n.func.attr == "reset"
                   and type(n.func.value) is ast.Attribute and n.func.value.attr == graph_attr)
                  or (type(n) is ast.Assign and any(type(t) is ast.Attribute and t.attr == graph_attr for t in n.targets))
                  for n in ast.walk(fn))  # ``self.graph.reset()`` or a new graph before capturing again
    if not replays or renewed:
        return False
    tests = [n for n in ast.walk(fn) if type(n) is ast.If and n.lineno < call.lineno <= n.end_lineno
             and _within(call, n.body)]
    if not tests:
        return False
    test = max(tests, key=lambda n: n.lineno).test  # the test right around the call (an inner ``if not captured``)
    return any(_changed_shape_test(part)
               for part in (test.values if type(test) is ast.BoolOp and type(test.op) is ast.Or else [test]))


def _changed_shape_test(test) -> bool:
    """``x.shape[1] != self.x.shape[1]``, ``n > self.max_n``: a test of what the input is now against what
    was captured, true again whenever a new one comes (not a first-time test such as ``i == 0``,
    ``self.g is None`` or ``not hasattr(self, "g")``)."""
    return type(test) is ast.Compare and len(test.ops) == 1 \
        and type(test.ops[0]) in (ast.NotEq, ast.Gt, ast.Lt, ast.GtE, ast.LtE) \
        and not any(type(side) is ast.Constant for side in (test.left, *test.comparators))


def _exclusive(a, b) -> bool:
    """Two captures in different branches of one ``if``/``else`` (or ``try`` handlers): only one runs."""
    for anc in a.ancestors:
        if anc in b.ancestors and type(anc) is ast.If:
            in_body_a = _within(a.stmt, anc.body)
            in_body_b = _within(b.stmt, anc.body)
            if in_body_a != in_body_b:
                return True
    return False


def _within(stmt, body) -> bool:
    return bool(body) and body[0].lineno <= stmt.lineno <= body[-1].end_lineno


def _reset_between(sf, name: str, lo: int, hi: int) -> bool:
    return any(c.meth == "reset" and lo < c.node.lineno < hi and text_of(c.node.func.value) == name for c in sf.calls)


@RULES.rule(
    Rule(
        code="CG510",
        name="compiled-input-mutation",
        category="static-address",
        message="`{what}` mutates an input of a function compiled with CUDA graphs in place",
        compile_message="`{what}` mutates an input of a function compiled with CUDA graphs in place: "
        "cudagraphs may be skipped for this graph (\"mutated inputs\")",
        fix="Return a new tensor instead of updating the argument in place; or pass the state as a "
        "module buffer (static inputs may be mutated).",
        manual=None,
        compile="warning",
        what="Checks for in-place methods (`x.add_()`, `x[:, 0].clamp_()`, ...) on the arguments of a function "
        "compiled with `mode=\"reduce-overhead\"` or `\"max-autotune\"`, and on the parameters of the helpers "
        "it hands those arguments to.",
        why="CUDA graph trees copy ordinary inputs into static buffers. An in-place update of such an "
        "input must be written back to the caller's tensor, so Inductor skips graphs for it and logs "
        "\"skipping cudagraphs due to mutated inputs\" (parameters and buffers are exempt).",
        example=code("""
            import torch

            @torch.compile(mode="reduce-overhead")
            def step(x):
                x.add_(1)
                return x * 2

            x = torch.randn(8, device="cuda")
            for _ in range(3):
                y = step(x)
        """),
        use_instead=code("""
            import torch

            @torch.compile(mode="reduce-overhead")
            def step(x):
                return (x + 1) * 2

            x = torch.randn(8, device="cuda")
            for _ in range(3):
                y = step(x)
        """),
        gpu_check="from torch._dynamo.utils import counters\nok = counters['inductor']['cudagraph_skips'] == 0",
    ),
    Calls(every=True),
)
def compiled_input_mutation(c, f):
    yield from _mutated_argument(c, f)


@RULES.also("CG510", Each("item_stores"))
def compiled_input_item_store(item, f):
    """``cache[:, pos] = v`` on an argument: an in-place write, like ``copy_``."""
    target, stmt = item
    value = target.value
    if type(value) is ast.Name and value.id in f.params and f.infer(value) is not None:
        yield found(stmt, stmt, on_input=value.id, what=f"{value.id}[...] = ...")


def _mutated_argument(c, f):
    m = c.meth
    if m is not None and m.endswith("_") and not m.startswith("_") and m != "requires_grad_":
        value = c.node.func.value
        viewed = value
        while type(viewed) is ast.Subscript:  # ``obs[:, 6:9].clamp_()`` writes into ``obs``
            viewed = viewed.value
        if type(viewed) is not ast.Name or viewed.id == f.self_name:
            return
        param = viewed.id if viewed.id in f.params else _iterated_param(f, viewed.id)
        if param is not None:
            yield found(c.node, c.stmt, on_input=param, what=f"{text_of(value)}.{m}()")


def _iterated_param(f, name: str) -> str | None:
    """The parameter whose elements a loop variable takes: ``b`` in ``for b, g in zip(buffers, grads)``
    or ``for b in buffers`` (a list of tensors passed in: updating ``b`` updates the input)."""
    for it, target in f.loops_binding(name):
        if type(it) is ast.Name and type(target) is ast.Name:
            return it.id if it.id in f.params else None
        if type(it) is ast.Call and type(it.func) is ast.Name and it.func.id == "zip" and type(target) is ast.Tuple:
            names = [t.id if type(t) is ast.Name else None for t in target.elts]
            if name in names and names.index(name) < len(it.args):
                arg = it.args[names.index(name)]
                return arg.id if type(arg) is ast.Name and arg.id in f.params else None
    return None
