"""CG4xx: silent replay hazards. Capture succeeds, but replays do something else than eager code."""

from __future__ import annotations

import ast

from cgkit.check import around as near
from cgkit.check import callers
from cgkit.check.facts import (
    CPU,
    MASK,
    RANDOM_FACTORIES,
    attr_kind,
    facts_of,
    is_self_attr,
    is_tensor,
    module_facts,
)
from cgkit.check.model import Rule
from cgkit.check.names import dotted
from cgkit.check.project import FuncRef
from cgkit.check.regions import module_itself
from cgkit.check.rules._base import Body, Calls, Each, Family, Region, code, found, is_false, text_of

_HOST_NOTE = (
    "A CUDA graph records GPU work only. Python code inside the region runs once, while the "
    "graph is being captured; `replay()` launches the recorded kernels and runs none of it."
)

RULES = Family()

_LOG_METHODS = frozenset("debug info warning warn error exception critical log".split())
_LOGGER_NAMES = frozenset("logger log LOGGER LOG _logger _log".split())
# Host effects meant for every step: output (print, files written, metrics). Reading a file (a
# kernel config, a checkpoint) during capture is one-time set-up, like a log line: not reported.
_HOST_CALLS = {
    "builtins.print": "`print()`",
    "builtins.open": "`open()` for writing",
    "builtins.input": "`input()`",
    "torch.save": "`torch.save()`",
    "json.dump": "`json.dump()`",
    "pickle.dump": "`pickle.dump()`",
    "numpy.save": "`numpy.save()`",
    "sys.stdout.write": "`sys.stdout.write()`",
    "sys.stderr.write": "`sys.stderr.write()`",
    "wandb.log": "`wandb.log()`",
}
_CLOCKS = {
    "time.time": "`time.time()`",
    "time.time_ns": "`time.time_ns()`",
    "time.perf_counter": "`time.perf_counter()`",
    "time.perf_counter_ns": "`time.perf_counter_ns()`",
    "time.monotonic": "`time.monotonic()`",
    "time.monotonic_ns": "`time.monotonic_ns()`",
    "time.process_time": "`time.process_time()`",
    "time.sleep": "`time.sleep()`",
    "datetime.datetime.now": "`datetime.now()`",
}
_LOGGING_CALLS = tuple(f"logging.{m}" for m in sorted(_LOG_METHODS))
_WRITER_METHODS = frozenset("add_scalar add_scalars add_histogram add_image add_text".split())


@RULES.rule(
    Rule(
        code="CG401",
        name="host-side-effect",
        trace=None,
        trace_blind="host code with no tensor in it (print of Python values, file I/O) runs no operator: a run has nothing to record; cgkit check reports it",
        category="host-code",
        message="{what} runs on the host: once at capture, never on replay",
        compile_message="{what} inside a compiled region: Dynamo does not trace it, so the graph breaks "
        "here (the code before and after runs as separate graphs)",
        fix="Move it out of the region: print, log or save around `replay()` (or the compiled call), from the output tensors.",
        manual="warning",
        compile="warning",
        what="Checks for host side effects meant to run on every step inside a captured region: `print`, "
        "files opened for writing and written, `torch.save`, `json.dump`, metric writers (`add_scalar`, "
        "`wandb.log`), and log calls that format a tensor. One-time set-up is not reported: a log line of "
        "Python values or a file read (a kernel configuration) runs once, at capture, as library code intends.",
        why=_HOST_NOTE + " A print in the region prints once; a file is written once; a metric is "
        "logged once. Under `torch.compile` such calls are graph breaks (measured for `print()` with "
        "torch 2.11 on an H200 and 2.13 on a CPU, benchmarks/compile_hazards.py).",
        example=code("""
            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x * 2
                print("step done")
        """),
        use_instead=code("""
            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x * 2
            for _ in range(3):
                g.replay()
                print("step done")  # runs on every step
        """),
        gpu_skip="host-only behaviour: nothing fails and the GPU result is the same; the call just does not run on replay",
    ),
    Calls(quals=(*_HOST_CALLS, *_LOGGING_CALLS), methods=(*_LOG_METHODS, "write", *_WRITER_METHODS)),
    yields_to=("CG106",),  # print(tensor): CG106 says more than "host code"
)
def host_side_effect(c, f):
    node, q = c.node, c.qual
    if q is not None:
        if q in _LOGGING_CALLS:
            if _formats_tensor(node, f):
                yield found(node, c.stmt, what=f"`{q}()` of a tensor")
            return
        if q == "builtins.open" and not _opens_for_writing(c):
            return
        yield found(node, c.stmt, what=_HOST_CALLS.get(q) or f"`{q}()`")
        return
    m, recv, value = c.meth, c.recv, node.func.value
    if m in _LOG_METHODS:
        if _is_logger(c):
            if _formats_tensor(node, f):
                yield found(node, c.stmt, what=f"`{text_of(value)}.{m}()` of a tensor")
    elif m == "write":
        if type(recv) is tuple and recv[0] == "file":
            yield found(node, c.stmt, what=f"`{text_of(value)}.write()`")
    elif not is_tensor(recv):
        yield found(node, c.stmt, what=f"`{text_of(value)}.{m}()`")


def _opens_for_writing(c) -> bool:
    mode = c.arg(1, "mode")
    if mode is None:
        return False  # open(path): reading
    if type(mode) is ast.Constant and isinstance(mode.value, str):
        return any(ch in mode.value for ch in "wax+")
    return True  # a mode we cannot read: say so


def _formats_tensor(node: ast.Call, f) -> bool:
    """A log call with a tensor among its arguments: formatting it reads the tensor on the host."""
    return any(is_tensor(f.infer(a)) for a in node.args[1:]) or any(
        is_tensor(f.infer(kw.value)) for kw in node.keywords if kw.arg is not None and kw.arg not in _LOG_OPTIONS)


_LOG_OPTIONS = ("exc_info", "stacklevel", "extra", "stack_info")


@RULES.rule(
    Rule(
        code="CG411",
        name="host-clock",
        trace=None,
        trace_blind="a clock read runs no operator: a run has nothing to record; cgkit check reports it",
        category="host-code",
        message="{what} reads the host clock inside the region: it runs once, at capture, so it times the capture",
        compile_message="{what} inside a compiled region: Dynamo does not trace the clock, so the graph breaks here",
        fix="Time around the region: read the clock before and after `replay()` (or the compiled call), "
        "after `torch.cuda.synchronize()`, or use CUDA events.",
        manual="warning",
        compile="warning",
        what="Checks for clocks and sleeps inside a captured or compiled region: `time.time()`, "
        "`perf_counter()`, `monotonic()`, `process_time()`, `datetime.now()` and `time.sleep()`.",
        why=_HOST_NOTE + " A timer inside the region measures the capture, not the step, and a sleep "
        "delays only the capture. Under `torch.compile` the clock calls are graph breaks; with torch "
        "2.11 on an H200 a `time.time()` value used in the computation even made Inductor fail to "
        "compile (`BackendCompilerFailed`; benchmarks/compile_hazards.py).",
        example=code("""
            import time

            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                start = time.perf_counter()
                y = x * 2
        """),
        use_instead=code("""
            import time

            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x * 2
            start = time.perf_counter()  # time the replay, not the capture
            g.replay()
            torch.cuda.synchronize()
            elapsed = time.perf_counter() - start
        """),
        gpu_skip="host-only behaviour: nothing fails and the GPU result is the same; the clock just reads the capture",
    ),
    Calls(quals=tuple(_CLOCKS)),
)
def host_clock(c, f):
    yield found(c.node, c.stmt, what=_CLOCKS[c.qual])


@RULES.rule(
    Rule(
        code="CG412",
        name="log-call-in-compiled-region",
        trace=None,
        trace_blind="a log call of Python values runs no operator: a run has nothing to record; cgkit check reports it",
        category="host-code",
        message="{what} inside a captured region",
        compile_message="{what} inside a compiled region: Dynamo does not trace `logging` calls, so the graph "
        "breaks here",
        fix="Log outside the compiled function (before or after the call), or guard the call with "
        "`if not torch.compiler.is_compiling():`.",
        manual=None,
        compile="warning",
        what="Checks for `logging` calls (`logger.info(...)`, `logging.warning(...)`) inside a function "
        "compiled with a CUDA-graph mode. Under manual capture a log line of Python values runs once, at "
        "capture, which is what library code intends: not reported there.",
        why="Dynamo does not trace `logging.Logger` methods: each call splits the compiled function "
        "into separate graphs, and the function was converted again on 8 of 12 calls (measured with "
        "torch 2.11 on an H200 and 2.13 on a CPU, benchmarks/compile_hazards.py): a log line in a "
        "`mode=\"reduce-overhead\"` function costs a graph break on every call.",
        example=code("""
            import logging

            import torch

            logger = logging.getLogger(__name__)


            @torch.compile(mode="reduce-overhead")
            def step(x):
                logger.info("step")
                return x * 2


            x = torch.randn(64, device="cuda")
            for _ in range(3):
                y = step(x)
        """),
        use_instead=code("""
            import logging

            import torch

            logger = logging.getLogger(__name__)


            @torch.compile(mode="reduce-overhead")
            def step(x):
                return x * 2


            x = torch.randn(64, device="cuda")
            for _ in range(3):
                y = step(x)
                logger.info("step")
        """),
        gpu_check="from torch._dynamo.utils import counters\nok = not counters['graph_break'] and not counters['unimplemented']",
    ),
    Calls(quals=_LOGGING_CALLS, methods=tuple(_LOG_METHODS)),
    yields_to=("CG401",),  # a log call that formats a tensor: CG401 says more
)
def log_call(c, f):
    if c.qual is not None or _is_logger(c):
        yield found(c.node, c.stmt, what=f"`{text_of(c.node.func)}()`")


def _is_logger(c) -> bool:
    value = c.node.func.value
    return (type(c.recv) is tuple and c.recv[0] == "logger") or (type(value) is ast.Name and value.id in _LOGGER_NAMES)


_MUTATORS = frozenset("append extend insert add update setdefault appendleft put".split())


@RULES.rule(
    Rule(
        code="CG402",
        name="host-state-update",
        trace=None,
        trace_blind="an update of Python state (a counter, a list) runs no operator: a run has nothing to record; cgkit check reports it",
        category="host-code",
        message="{what} updates host state: it happens once at capture, not on each replay",
        fix="Keep per-step state in GPU tensors updated in place (`count.add_(1)`), or update it outside the region.",
        compile_message="{what} updates Python state on every call of a compiled function: Dynamo guards "
        "on that state, so each call recompiles until the recompile limit, then the function runs eagerly",
        manual="warning",
        compile="warning",
        what="Checks for Python state updated inside a captured region: counters (`self.step += 1`) "
        "and containers that outlive the call (`self.history.append(...)`). A container that the "
        "code also pops (a stack pushed and popped around a call) is balanced and not reported.",
        why=_HOST_NOTE + " A step counter stays at the value it had after capture, and a list gets "
        "one entry instead of one per step. Code that later reads that state (a schedule, a "
        "logging condition) silently sees the wrong value. Under `torch.compile` (measured with "
        "torch 2.11 on an H200 and 2.13 on a CPU, benchmarks/compile_hazards.py) a global counter, a "
        "module attribute counter and an appended list each recompile the function on every call until "
        "`torch._dynamo.config.recompile_limit` (8) is hit; after that the function runs eagerly.",
        example=code("""
            import torch

            class Scaler(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.calls = 0

                def forward(self, x):
                    self.calls += 1
                    return x * 2

            m = Scaler()
            x = torch.randn(4, device="cuda")
            m(x)  # warm-up
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = m(x)
            for _ in range(3):
                g.replay()
        """),
        use_instead=code("""
            import torch

            class Scaler(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer("calls", torch.zeros((), device="cuda"))

                def forward(self, x):
                    self.calls.add_(1)  # a GPU counter, updated by every replay
                    return x * 2

            m = Scaler()
            x = torch.randn(4, device="cuda")
            m(x)  # warm-up
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = m(x)
            for _ in range(3):
                g.replay()
        """),
        gpu_check="torch.cuda.synchronize()\nok = int(m.calls) == 4  # warm-up + 3 replays",
    ),
    Calls(methods=tuple(_MUTATORS)),
)
def host_container_update(c, f):
    value = c.node.func.value
    if c.meth in _OBJECT_METHOD_NAMES and not _built_as_container(f, value):
        return  # ``self.kv_cache.update(pos, k, v)``: a method of some object, not a dict's update
    if _persistent_container(f, value) and not _popped_too(f, value):
        yield found(c.node, c.stmt, what=f"`{text_of(value)}.{c.meth}()`")


# Container methods that other objects have under the same name (a KV cache's ``update``, a queue's
# ``put``): reported only on what the class builds as a container.
_OBJECT_METHOD_NAMES = frozenset(("update", "add", "put"))
_CONTAINER_CALLS = frozenset("list dict set deque defaultdict Counter OrderedDict".split())


def _built_as_container(f, value) -> bool:
    """``self.stats`` assigned a list, dict or set (literal, comprehension or constructor) in its class,
    or a module-level name assigned one."""
    while type(value) is ast.Subscript:
        value = value.value
    if type(value) is ast.Attribute and type(value.value) is ast.Name and value.value.id == f.self_name and f.cls is not None:
        nodes = [n for method in f.cls.methods.values() for n in ast.walk(method)]
        attr = value.attr
    elif type(value) is ast.Name:
        nodes, attr = list(f.module.tree.body), None
    else:
        return False
    for node in nodes:
        if type(node) is not ast.Assign:
            continue
        for target in node.targets:
            named = (target.attr == attr and type(target.value) is ast.Name) if type(target) is ast.Attribute and attr \
                else (type(target) is ast.Name and attr is None and target.id == value.id)
            if named and _is_container_value(node.value):
                return True
    return False


def _is_container_value(node) -> bool:
    if type(node) in (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp):
        return True
    if type(node) is ast.Call:
        parts = dotted(node.func)
        return bool(parts) and parts[-1] in _CONTAINER_CALLS
    return False


def _popped_too(f, value) -> bool:
    """``stack.append(x)`` with a ``stack.pop()`` in the same file: pushes and pops stay balanced."""
    text = text_of(value)
    if text.startswith(f"{f.self_name}."):
        text = text[len(f.self_name) + 1:]
    return f"{text}.pop(" in f.module.text


def _persistent_container(f, value) -> bool:
    """``self.history`` or a module-level list (or an entry of one: ``METRICS["acc"]``): state that
    outlives one call of the function (in ``__init__``, ``self`` is the object being built: its lists
    are new)."""
    while type(value) is ast.Subscript:
        value = value.value
    t = type(value)
    if t is ast.Attribute:
        base = value.value
        if type(base) is ast.Name and base.id == f.self_name and f.cls is not None and f.fref.name != "__init__":
            kind = attr_kind(f.cls, value.attr, f.project)
            return not is_tensor(kind) and type(kind) is not tuple
        return False
    if t is ast.Name:
        name = value.id
        if type(f.fref.node) is ast.Module or name in f.params:
            return False
        if any(s.name == name for s in f.stores):
            return False
        mod = module_facts(f.project, f.module)
        return mod is not None and any(s.name == name for s in mod.stores)
    return False


@RULES.also("CG402", Each("item_stores"))
def host_counter_in_container(item, f):
    """``stats["calls"] += 1`` on a dict or list that outlives the call (the caller's, a module's, the
    object's); filling a cache entry with a plain assignment is one-time set-up, and is not reported."""
    target, stmt = item
    value = target.value
    passed_in = type(value) is ast.Name and value.id in f.params and not is_tensor(f.infer(value)) \
        and not any(s.name == value.id and s.node.lineno < stmt.lineno for s in f.stores)  # ``out = list(x.size())``
    if type(stmt) is ast.AugAssign and (passed_in or _persistent_container(f, value)):
        yield found(stmt, stmt, what=f"`{text_of(target)} {_op(stmt.op)}= ...`")


@RULES.also("CG402", Each("self_stores"))
def host_attribute_update(item, f):
    """``self.count += 1`` and ``self.total = self.total + 1`` on a Python number."""
    attr, stmt, value, _kind = item
    if f.fref.name in near.CONSTRUCTION:
        return  # the object being built
    kind = attr_kind(f.cls, attr, f.project) if f.cls is not None else None
    if type(stmt) is ast.AugAssign:
        counter = type(stmt.value) is ast.Constant and isinstance(stmt.value.value, (int, float))
        # ``self.seen_tokens += k.shape[2]`` on a number set in __init__ (a Python counter)
        counted = not counter and not is_tensor(f.infer(stmt.value)) and _initial_number(f, attr)
        if (counter or counted) and not is_tensor(kind):
            yield found(stmt, stmt, what=f"`self.{attr} {_op(stmt.op)}= ...`")
    elif value is not None and _reads_self_attr(value, f.self_name, attr):
        if not (is_tensor(kind) or is_tensor(f.infer(value))) and type(value) is ast.BinOp and _is_number(value.right):
            yield found(stmt, stmt, what=f"`self.{attr} = self.{attr} ...`")


def _initial_number(f, attr: str) -> bool:
    if f.cls is None:
        return False
    init = f.cls.methods.get("__init__")
    if init is None:
        return False
    from_init = [st for st in facts_of(f.project, FuncRef(f.cls.module, init, f.cls, "__init__")).self_stores
                 if st.attr == attr and st.value is not None]
    return bool(from_init) and near.scalar_literal(from_init[0].value)


@RULES.also("CG402", Body())
def global_update(f):
    if type(f.fref.node) is not ast.Module and f.global_names:
        for store in f.stores:
            if store.aug and store.name in f.global_names:
                yield found(store.node, store.node, what=f"global `{store.name}` update")


@RULES.also("CG402", Region())
def host_update_in_capture(region, ctx):
    """Host containers and counters that live outside the region, updated inside it."""
    around = near.around(region, ctx)
    if around is None:
        return
    sf, start, end = around.facts, around.start, around.end
    for c in sf.calls:
        if start <= c.node.lineno <= end and c.meth in _MUTATORS:
            value = c.node.func.value
            kind = sf.kinds.get(value.id) if type(value) is ast.Name else None
            if type(value) is ast.Name and value.id not in around.stores and not is_tensor(kind) and type(kind) is not tuple:
                if any(s.name == value.id for s in sf.stores):
                    yield found(c.node, what=f"`{value.id}.{c.meth}()`")
    for s in sf.stores:
        if s.aug and start <= s.node.lineno <= end and s.name in around.reads and not is_tensor(
                near.kind_before(sf, s.name, around.rs)):
            yield found(s.node, what=f"`{s.name} {_op(s.node.op)}= ...`")


_RNG_STATE = frozenset(
    """torch.manual_seed torch.seed torch.get_rng_state torch.set_rng_state torch.cuda.manual_seed
    torch.cuda.manual_seed_all torch.cuda.seed torch.cuda.seed_all torch.cuda.get_rng_state
    torch.cuda.set_rng_state torch.cuda.get_rng_state_all torch.cuda.set_rng_state_all
    torch.random.manual_seed torch.random.seed torch.random.get_rng_state torch.random.set_rng_state
    torch.random.fork_rng torch.cuda.random.manual_seed torch.cuda.random.get_rng_state
    torch.cuda.random.set_rng_state numpy.random.seed random.seed""".split()
)
_HOST_SEEDS = ("numpy.random.seed", "random.seed")
_TORCH_RANDOM = tuple(f"torch.{name}" for name in sorted(RANDOM_FACTORIES))


@RULES.rule(
    Rule(
        code="CG403",
        name="host-rng",
        category="host-code",
        message="`{what}` draws a random number on the host: the value drawn at capture is replayed every time",
        compile_message="`{what}` draws a random number on the host inside a compiled region (graph break or a constant)",
        fix="Draw on the GPU with the default CUDA generator (`torch.rand(..., device=\"cuda\")`), which advances on every replay.",
        compile="warning",
        what="Checks for Python `random`, `numpy.random` and CPU `torch.rand*` calls inside a captured region, "
        "and draws from a host generator object the file makes (`rng = np.random.RandomState(seed)`, then `rng.permutation(n)`).",
        why=_HOST_NOTE + " A random number drawn on the host becomes a constant of the graph: "
        "dropout masks, noise or sampling decisions repeat identically on every replay. CUDA random "
        "ops with the default generator are safe: the graph advances their offset on each replay.",
        example=code("""
            import random

            import torch

            x = torch.zeros(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x + random.random()
            g.replay()
            first = y.clone()
            g.replay()
        """),
        use_instead=code("""
            import torch

            x = torch.zeros(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x + torch.rand((), device="cuda")
            g.replay()
            first = y.clone()
            g.replay()
        """),
        gpu_check="torch.cuda.synchronize()\nok = not torch.equal(first, y)",
    ),
    Calls(qualified=True),
)
def host_rng(c, f):
    q = c.qual
    if q in _HOST_SEEDS or (q not in _RNG_STATE and q.startswith(("random.", "numpy.random.")) and q.count(".") <= 2):
        yield found(c.node, c.stmt, what=q)
    elif q in _TORCH_RANDOM and q[6:] in ("rand", "randn", "randint", "randperm"):
        if c.kwarg("device") is None and c.kwarg("generator") is None:
            yield found(c.node, c.stmt, what=f"{q}() without device=")


_HOST_RNG_MAKERS = frozenset({"numpy.random.RandomState", "numpy.random.default_rng", "numpy.random.Generator",
                              "random.Random"})
_HOST_RNG_NON_DRAWS = frozenset({"seed", "get_state", "set_state", "getstate", "setstate", "spawn", "bit_generator"})


@RULES.also("CG403", Calls(every=True))
def host_rng_object(c, f):
    """``rng.permutation(n)`` on ``rng = np.random.RandomState(seed)`` (a research script's own host
    generator, made here or at the top of the file)."""
    if c.meth is None or c.meth in _HOST_RNG_NON_DRAWS or type(c.node.func.value) is not ast.Name:
        return
    name = c.node.func.value.id
    stores = [s for s in f.stores if s.name == name]
    owner = f
    if not stores and name not in f.params:
        owner = module_facts(f.project, f.module)
        stores = [s for s in owner.stores if s.name == name]
    values = [getattr(s.node, "value", None) for s in stores]
    if values and all(type(v) is ast.Call and owner.qual(v.func) in _HOST_RNG_MAKERS for v in values) \
            and all(len(getattr(s.node, "targets", ())) == 1 and type(s.node.targets[0]) is ast.Name for s in stores):
        yield found(c.node, c.stmt, what=f"{name}.{c.meth}() (a host generator)")


_SCALAR_ANNOTATIONS = ("int", "float", "bool")


@RULES.rule(
    Rule(
        code="CG404",
        name="python-scalar",
        category="python-scalar",
        message="Python value `{what}` is read at capture{detail}: its value is baked into the graph and later changes are ignored",
        compile_message="Python value `{what}` changes between calls{detail}: each new value recompiles (then the "
        "function runs eagerly past the recompile limit) or becomes an input the graph does not capture",
        fix="Hold the value in a GPU tensor created before capture and update it with `.fill_(value)` before each `replay()`.",
        compile="warning",
        what="Checks for Python values read inside a captured region that change between replays (or "
        "between calls of a compiled function): names rebound after the capture, attributes and globals "
        "set after it (directly or by a method called there), attributes set by code of the file that runs "
        "while the graph is in use (a setter method, a callback, a calibration, a training loop after the "
        "call that graphs; read on `self`, on an untyped model or on a settings object, also one handed to the "
        "class that captures or compiles, `Trainer(cfg)`, and changed in the loop that runs it), entries of a module-level dict "
        "(`CFG[\"dt\"] = ...`), optimizer param-group entries "
        "(`group[\"lr\"] = ...`, a scheduler's `step()` when the learning rate is a Python number) for "
        "a captured optimizer step or one compiled with CUDA graphs, and "
        "Python numbers passed to a compiled function (or to one a capturing decorator wraps) that change "
        "from call to call. A value that is "
        "never changed after capture (a setting, a lazy cache, an import-time flag) is not reported.",
        why="A graph stores the kernels and their arguments as they were at capture. A learning rate, "
        "temperature or step count read from Python is one of those arguments: replays keep using "
        "the captured value, with no error. An optimizer step captured with a Python learning rate keeps "
        "that rate, whatever a scheduler sets later. Under `torch.compile` (measured with torch 2.11 on "
        "an H200, benchmarks/compile_hazards.py) an attribute set between calls recompiles the function, "
        "and a number argument that changes every call recompiled it once and then ran 12 calls with no "
        "CUDA graph recorded at all. An optimizer step compiled with `mode=\"reduce-overhead\"` recompiled "
        "on every new Python learning rate or weight decay (a param-group write or a scheduler) until "
        "the recompile limit, 8, and then ran eagerly; with the learning rate in a tensor it compiled "
        "once (benchmarks/compiled_optimizer_lr.py).",
        example=code("""
            import torch

            x = torch.ones(4, device="cuda")
            scale = 2.0
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x * scale
            scale = 3.0
            g.replay()
        """),
        use_instead=code("""
            import torch

            x = torch.ones(4, device="cuda")
            scale = torch.full((), 2.0, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x * scale
            scale.fill_(3.0)
            g.replay()
        """),
        gpu_check="torch.cuda.synchronize()\nok = torch.equal(y, x * 3.0)",
    ),
    Region(),
)
def python_scalar(region, ctx):
    """Python values the region reads that the code between replays (or calls) changes."""
    changes = near.changes_between(region, ctx)
    project = ctx.project
    if changes:
        reported = set()
        # A value is reported once, where its owner reads it (``self.step`` in the model) rather than
        # where another object reaches into it (``self.model.step`` in the runner).
        reads = sorted(near.reads_in_region(region, ctx), key=lambda r: not _read_on_self(r))
        for read in reads:
            key = read.key
            writes = changes.get(key)
            if key[0] == "self_item":  # ``self.cfg["radius"]``: that entry, or the whole dict, set again
                writes = [*(writes or []), *changes.get(("self_item", key[1], None), [])]
            if not writes:
                continue
            if _tensor_read(read, project):
                continue
            if key[0] == "self_item":
                writes = [w for w in writes if near.related(w.cls, read.cls, project)]
                if not writes:
                    continue
                report_key = (key, id(read.cls))
                what = f"{text_of(read.node.value)}[{key[2]!r}]"
            elif key[0] == "attr":
                writes = [w for w in writes if near.related(w.cls, read.cls, project)]
                if not writes:
                    continue
                report_key = (key, id(writes[0].cls))
                what = f"{text_of(read.node.value)}.{key[1]}"
            elif key[0] == "global_item":
                report_key, what = key, f"{key[2]}[{key[3]!r}]"
            else:
                report_key = key
                what = key[-1]
            if not any(w.literal for w in writes) and not near.initial_literal(read, ctx):
                continue  # no evidence that it is a Python number, flag or string (a tuple of tensors...)
            if report_key in reported:
                continue
            reported.add(report_key)
            yield found(read.node, module=read.module, chain=read.chain, what=what, detail=_changed_at(writes[0], read.module))
    yield from _optimizer_groups(region, ctx, changes)
    yield from _changing_arguments(region, ctx)
    yield from _changing_arguments_of_decorated(region, ctx)
    if region.kind == "declared":
        for root in region.roots:
            facts = facts_of(project, root)
            for name in root.required_params:
                ann = facts.param_nodes[name].annotation
                if type(ann) is ast.Name and ann.id in _SCALAR_ANNOTATIONS:
                    yield found(facts.param_nodes[name], module=root.module, what=name,
                                detail=" (a Python-number parameter of the captured function)")


def _read_on_self(read) -> bool:
    value = getattr(read.node, "value", None)
    return read.facts is not None and type(value) is ast.Name and value.id == read.facts.self_name


def _tensor_read(read, project) -> bool:
    """A tensor (or an object) where it is read: rebinding it is CG405's business, not a Python value."""
    if read.key[0] == "attr":
        kind = attr_kind(read.cls, read.key[1], project) if read.cls is not None else None
    else:
        kind = read.facts.infer(read.node) if read.facts is not None else None
    return is_tensor(kind) or type(kind) is tuple


def _changed_at(change, module) -> str:
    """Where a value changes: the line between replays, and the setter it calls when there is one."""
    where_module, node = change.via if change.via is not None else (change.module, change.node)
    at = f"L{node.lineno}" if where_module is module else f"{where_module.path}:{node.lineno}"
    if change.via is not None:
        return f" (it is changed at {at}, by `{text_of(change.via[1].func)}()`)"
    return f" (it is changed at {at})"


def _optimizer_groups(region, ctx, changes):
    """``group["lr"] = ...`` or a scheduler step after capturing an optimizer step."""
    if region.klass == "compile":
        yield from _compiled_step_groups(region, ctx)
        return
    if region.klass != "manual":
        return
    steps = near.optimizer_steps(region)
    if not steps:
        return
    step = steps[0][1]
    where = f" (by the optimizer step captured at L{step.node.lineno})"
    for key, writes in changes.items():
        if key[0] == "group":
            for w in writes:
                yield found(w.node, module=w.module, what=f'param_groups[...]["{key[1]}"]', detail=where)
        elif key[0] == "scheduler" and not any(near.tensor_lr(c.recv) for _, c in steps):
            for w in writes:
                yield found(w.node, module=w.module, what='param_groups[...]["lr"]',
                            detail=f"{where[:-1]}; `{text_of(w.node.func)}()` sets it here)")


_COMPILED_STEP_DETAIL = (" (`{owner}.step` is compiled with CUDA graphs at L{line}; measured on torch 2.11, each "
                         "new Python value of `{key}` recompiled the step until the recompile limit, 8, and then "
                         "it ran eagerly)")


def _compiled_step_groups(region, ctx):
    """An optimizer step compiled with CUDA graphs (``torch.compile(opt.step, mode="reduce-overhead")``, or
    a compiled function that calls ``opt.step()``) and that optimizer's param-group numbers changed
    where the step runs again: a scheduler's ``step()`` (when the learning rate is a Python
    number), or ``group["lr"] = ...`` (any group number) in a loop or in a function that calls the
    compiled step. A tensor learning rate is refilled in place and recompiles nothing."""
    optimizers = _compiled_optimizers(region, ctx)
    if not optimizers:
        return
    stepping = {inv.facts.fref.key for inv in near.invocations(region, ctx)}
    for owner, kind in optimizers.items():
        yield from _group_changes(region, ctx, owner, near.tensor_lr(kind), stepping)


def _compiled_optimizers(region, ctx) -> dict:
    """The optimizers whose ``step()`` a CUDA-graph compile holds: ``torch.compile(opt.step, ...)``, or
    a compiled function that calls ``opt.step()`` (``@torch.compile(mode=...) def opt_step():
    opt.step()``); by the optimizer's text, with its kind."""
    out = {}
    call = region.node
    if type(call) is ast.Call and call.args and region.scope is not None:
        target = call.args[0]
        if type(target) is ast.Attribute and target.attr == "step":
            kind = facts_of(ctx.project, region.scope).infer(target.value)
            if type(kind) is tuple and kind[0] == "optim":
                out[text_of(target.value)] = kind
    for _facts, step in near.optimizer_steps(region):
        out.setdefault(text_of(step.node.func.value), step.recv)
    return out


def _group_changes(region, ctx, owner: str, tensor_lr: bool, stepping: set):
    for fref in callers.functions_of(region.module):
        facts = facts_of(ctx.project, fref)
        for c in facts.calls:  # a scheduler built on this optimizer
            if not tensor_lr and c.meth == "step" and type(c.recv) is tuple and c.recv[0] == "scheduler" \
                    and len(c.recv) > 2 and type(c.recv[2]) is ast.Call and c.recv[2].args \
                    and text_of(c.recv[2].args[0]) == owner:
                yield found(c.node, module=facts.module, what=f'{owner}.param_groups[...]["lr"]',
                            detail=_COMPILED_STEP_DETAIL.format(owner=owner, line=region.line, key="lr"))
        for target_node, stmt in facts.item_stores:
            key = near.group_key(facts, target_node)
            if key is None or (key == "lr" and tensor_lr) or near.group_owner(facts, target_node) != owner:
                continue
            in_loop = any(lp.lineno <= stmt.lineno <= lp.end_lineno and not near.iterates_param_groups(lp)
                          for lp in facts.loops)
            if (in_loop or fref.key in stepping or _called_where_steps_repeat(fref, region, ctx, owner)
                    or _setter_at_run_time(fref, stmt, region, ctx) or _called_beside_steps(fref, region, ctx, stepping)) \
                    and not _overwritten_before_next_step(facts, stmt, target_node, region, ctx):
                yield found(stmt, module=facts.module, what=f'{owner}.param_groups[...]["{key}"]',
                            detail=_COMPILED_STEP_DETAIL.format(owner=owner, line=region.line, key=key))


def _setter_at_run_time(fref, stmt, region, ctx) -> bool:
    """A method of the class that compiles the step, run while it is in use (``def set_lr(self, lr)``)."""
    if fref.cls is None or region.scope is None or fref.cls is not region.scope.cls:
        return False
    after = near.lines_after_capture(fref, region, ctx)
    return after is not None and stmt.lineno > after


def _called_where_steps_repeat(fref, region, ctx, owner: str) -> bool:
    """A helper handed the optimizer (``adjust_learning_rate(optimizer, epoch)``) called in the loop that
    runs the compiled step."""
    if type(fref.node) is ast.Module:
        return False
    for caller, call in callers.call_sites(ctx.project, fref.name, fref):
        if not any(text_of(a) == owner for a in [*call.args, *(kw.value for kw in call.keywords)]):
            continue
        for inv in near.invocations(region, ctx):
            if inv.facts.fref.key == caller.key and any(lo <= call.lineno <= hi for lo, hi in inv.loops):
                return True
    return False


def _called_beside_steps(fref, region, ctx, stepping: set) -> bool:
    """A method of another object that holds the optimizer (``Schedule(trainer)`` with ``self.opt =
    trainer.opt``), called in a loop that also calls a function running the compiled step: ``for epoch
    ...: for b in loader: tr.step(b)`` then ``sched.on_epoch(epoch)``."""
    if fref.cls is None or type(fref.node) is ast.Module or not _built_by_or_with(fref.cls, region, ctx):
        return False
    names = {inv.facts.fref.name for inv in near.invocations(region, ctx)}
    for caller, call in callers.call_sites(ctx.project, fref.name, fref):
        facts = facts_of(ctx.project, caller)
        for loop in facts.loops:
            if loop.lineno <= call.lineno <= loop.end_lineno and any(
                    c.meth in names and loop.lineno <= c.node.lineno <= loop.end_lineno for c in facts.calls):
                return True
    return False


def _built_by_or_with(cls, region, ctx) -> bool:
    """Objects of ``cls`` are built by the class that compiles the step (``DecayStrategy(self.opt)`` in its
    methods) or handed one of its objects (``Schedule(trainer)``): what they hold is that class's optimizer."""
    owner = region.scope.cls if region.scope is not None else None
    if owner is None:
        return False
    for fref in callers.functions_of(region.module):
        facts = facts_of(ctx.project, fref)
        for c in facts.calls:
            if type(c.node.func) is not ast.Name or c.node.func.id != cls.name:
                continue
            if fref.cls is owner:
                return True
            for arg in [*c.node.args, *(kw.value for kw in c.node.keywords)]:
                kind = facts.infer(arg)
                if type(kind) is tuple and kind[0] == "inst" and owner in kind[1].mro(ctx.project):
                    return True
    return False


def _overwritten_before_next_step(facts, stmt, target, region, ctx) -> bool:
    """``group["lr"] = lr2`` after the loop's last step, where the loop body sets the same entry again before its
    first step (AWD-LSTM's scaled rate, put back after each step): no step sees the value it writes."""
    steps = [inv.call.node.lineno for inv in near.invocations(region, ctx) if inv.facts is facts]
    written = text_of(target)
    for loop in facts.loops:
        if not loop.lineno < stmt.lineno <= loop.end_lineno or near.iterates_param_groups(loop):
            continue
        inside = [line for line in steps if loop.lineno <= line <= loop.end_lineno]
        if not inside or stmt.lineno < max(inside):
            continue
        for other in loop.body:  # set unconditionally in the body, before the first step
            if other is not stmt and other.lineno < min(inside) and type(other) is ast.Assign \
                    and any(text_of(t) == written for t in other.targets):
                return True
    return False


def _changing_arguments(region, ctx):
    """A compiled function called in a loop with a Python number that changes every iteration: reported
    where the compiled code reads the parameter that receives it (at the call when it is never read)."""
    root = region.roots[0] if region.roots else None
    root_facts = facts_of(ctx.project, root) if root is not None else None
    reported = set()
    for inv in near.invocations(region, ctx):
        if not inv.loops:
            continue
        facts, call = inv.facts, inv.call
        params = root.positional_params if root is not None else []
        pairs = _argument_pairs(call.node, params)
        for param, arg in pairs:
            change = _changing_number(facts, arg, inv.loops)
            if change is None or is_tensor(facts.infer(arg)):
                continue
            detail = f" (passed at L{call.node.lineno}; it changes every call, set at L{change})"
            reads = [n for n in root_facts.loads if n.id == param] if root_facts is not None and param else []
            if not reads:
                yield found(arg, module=facts.module, what=text_of(arg), detail=detail)
                continue
            for owner, chain, name, node in _reads_through_helpers(root, root_facts, param, reads, ctx):
                if (name, node.lineno, owner.fref.key) not in reported:
                    reported.add((name, node.lineno, owner.fref.key))
                    yield found(node, module=owner.module, chain=chain, what=name, detail=detail)


def _argument_pairs(call: ast.Call, params: list[str]) -> list:
    """(parameter, argument) for each argument of a call: positional ones by ``params`` (None past them)."""
    pairs = [(params[i] if i < len(params) else None, a) for i, a in enumerate(call.args) if type(a) is not ast.Starred]
    return pairs + [(kw.arg, kw.value) for kw in call.keywords if kw.arg is not None]


def _changing_arguments_of_decorated(region, ctx):
    """A function a capturing decorator wraps (``@cuda_graphed``), called in a loop with a Python number that
    changes every iteration (``self.decode_step(tokens, labels, t)``): the graph keeps the number of the call
    that captured it. Reported where the function reads the parameter."""
    reported = set()
    for passed in region.passed:
        if not passed.helper.startswith("@"):
            continue
        target = passed.target
        target_facts = facts_of(ctx.project, target)
        params = target.positional_params
        for fref, call in callers.call_sites(ctx.project, target.name, target):
            facts = facts_of(ctx.project, fref)
            loops = [(lp.lineno, lp.end_lineno) for lp in facts.loops if lp.lineno <= call.lineno <= lp.end_lineno]
            if not loops:
                continue
            for param, arg in _argument_pairs(call, params):
                change = _changing_number(facts, arg, loops) if param else None
                if change is None or is_tensor(facts.infer(arg)):
                    continue
                reads = [n for n in target_facts.loads if n.id == param]
                if reads and (target.key, param) not in reported:
                    reported.add((target.key, param))
                    yield found(reads[0], module=target.module, chain=[_root_step(target)], what=param,
                                detail=f" (passed at L{call.lineno}; it changes every call, set at L{change})")


def _reads_through_helpers(root, root_facts, param: str, reads, ctx):
    """Where the compiled code uses a parameter: its reads, except those that only hand it on to a helper
    of the project (``sample_gmm(y, temperature)``), which are replaced by the helper's own reads of the
    parameter receiving it (``pi / temperature``), one call down."""
    for node in reads:
        handed = None
        for c in root_facts.calls:
            if any(a is node for a in c.node.args):
                targets = ctx.resolve(root_facts, c)
                if len(targets) == 1:
                    index = next(i for i, a in enumerate(c.node.args) if a is node)
                    params = targets[0].positional_params
                    if index < len(params):
                        handed = (targets[0], params[index])
                break
        if handed is not None:
            helper_facts = facts_of(ctx.project, handed[0])
            inner = [n for n in helper_facts.loads if n.id == handed[1]]
            if inner and not any(s.name == handed[1] for s in helper_facts.stores):
                chain = [_root_step(root), {**_root_step(handed[0]), "call_line": node.lineno}]
                for n in inner:
                    yield helper_facts, chain, handed[1], n
                continue
        yield root_facts, [_root_step(root)], param, node


def _changing_number(facts, arg, loops) -> int | None:
    """The line where a Python number in ``arg`` (a name, arithmetic over names, or a function of them:
    ``lam_schedule(update, total)``) changes in the loop. A name inside an index or a method call
    (``x[:, :T].clone()``) shapes a tensor: it is not the argument."""
    for name in _arithmetic_names(arg):
        for s in facts.stores:
            if s.name == name.id and any(lo <= s.node.lineno <= hi for lo, hi in loops) and near.python_number_binding(s, facts):
                return s.node.lineno
    return None


def _arithmetic_names(expr) -> list:
    if type(expr) is ast.Name:
        return [expr]
    if type(expr) is ast.BinOp:
        return _arithmetic_names(expr.left) + _arithmetic_names(expr.right)
    if type(expr) is ast.UnaryOp:
        return _arithmetic_names(expr.operand)
    if type(expr) is ast.Call and type(expr.func) is ast.Name:  # ``lam_schedule(update, total)``
        return [n for a in expr.args for n in _arithmetic_names(a)]
    return []


def _root_step(root) -> dict:
    return {"name": root.display, "line": root.line, "path": root.module.path, "call_line": None}


@RULES.rule(
    Rule(
        code="CG405",
        name="rebound-static-input",
        category="static-address",
        message="`{what}` is an input of the graph captured at L{line} but is {how} here: replays keep reading the old tensor",
        compile_message="`{what}` is read by CUDA-graph-compiled code (from L{line}) and is {how} here: cudagraph "
        "trees find a new address for a static input and record the graph again, and after 128 such "
        "re-recordings the function runs without CUDA graphs",
        fix="Keep the captured tensor alive and write new data into it: `{what}.copy_(new_data)`.",
        compile="warning",
        what="Checks for inputs of a manual capture that are rebound (or deleted) after capture "
        "instead of being updated in place (also entries of a runner's container of static inputs, "
        "`self.inputs[bs] = x`, where it replays or in another method that does not capture anew), for state the captured code reads and then rebinds "
        "(`h = self.cell(x, self.h); self.h = h`: replays keep reading the tensor held at capture), for "
        "tensors of the region's modules (and parameters of a graphed or compiled model) given a new object "
        "by code of the file that runs while the graph is in use (`self.model.prior = prior.cuda()`), and for tensors a CUDA-graph-compiled module reads "
        "(parameters, buffers, other tensor attributes) that another of its methods replaces.",
        why="A graph reads its inputs from the addresses they had at capture. Binding the Python name "
        "to a new tensor does not move the data there: the graph keeps reading the old tensor, and "
        "if that tensor is freed its memory may be reused by something else. Under `torch.compile` "
        "with CUDA graphs, a module's parameters and buffers are static inputs: a new tensor there "
        "makes cudagraph trees record the graph again (\"static input data pointer changed\"), and "
        "once `triton.cudagraph_unexpected_rerecord_limit` (128) is passed the function falls back "
        "to running without graphs.",
        example=code("""
            import torch

            static_x = torch.zeros(4, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = static_x * 2
            static_x = torch.ones(4, device="cuda")
            g.replay()
        """),
        use_instead=code("""
            import torch

            static_x = torch.zeros(4, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = static_x * 2
            static_x.copy_(torch.ones(4, device="cuda"))
            g.replay()
        """),
        gpu_check="torch.cuda.synchronize()\nok = torch.equal(y, static_x * 2)",
    ),
    Region(),
)
def rebound_static_input(region, ctx):
    around = near.around(region, ctx)
    if around is None:
        return
    sf, rs = around.facts, around.rs
    reported = set()
    for s in sf.stores:
        if s.name in reported or not around.rebound_later(s) or not is_tensor(near.kind_before(sf, s.name, rs)):
            continue
        if s.aug:
            continue  # x += y on a tensor updates it in place
        if _looked_up_again(s, near.kept_in(region, ctx, s.name)):
            continue  # ``static, out = self.io[key]``: the captured tensor itself, from where the capture kept it
        reported.add(s.name)
        yield found(s.node, what=s.name, line=region.line, how="rebound")
    for name, stmt in sf.dels:
        if name in around.reads and around.later(stmt.lineno) and is_tensor(near.kind_before(sf, name, rs)) \
                and name not in reported:
            reported.add(name)
            yield found(stmt, what=name, line=region.line, how="deleted")
    yield from _rebound_by_callers(region, ctx, around)


def _rebound_by_callers(region, ctx, around):
    """A capture helper that returns its static inputs (``return g, static_input, static_loss``): a caller
    that binds one and later rebinds the name (``static_input = data.cuda()``) before a replay feeds the
    graph nothing new."""
    sf, scope = around.facts, region.scope
    if type(scope.node) is ast.Module:
        return
    inputs = {name for name in around.reads if is_tensor(near.kind_before(sf, name, around.rs))}
    returned = near.returned_positions(scope.node, inputs)
    for caller, call in callers.call_sites(ctx.project, scope.name, scope) if returned else ():
        cf = facts_of(ctx.project, caller)
        names = near.bound_from(cf, call, returned)
        replays = [c.node.lineno for c in cf.calls if c.meth == "replay" and c.node.lineno > call.end_lineno]
        for st in cf.stores:
            line = st.node.lineno
            if st.name not in names or line <= call.end_lineno or st.aug or type(st.node) is not ast.Assign \
                    or any(type(n) is ast.Call and text_of(n.func) == scope.name for n in ast.walk(st.node.value)):
                continue  # (bound again by another capture: a new graph)
            loops = [(lp.lineno, lp.end_lineno) for lp in cf.loops if lp.lineno <= line <= lp.end_lineno]
            if any(r > line or any(lo <= r <= hi for lo, hi in loops) for r in replays):
                yield found(st.node, module=cf.module, what=st.name, line=region.line, how="rebound")
                names = names - {st.name}


@RULES.also("CG405", Region())
def state_rebound_during_capture(region, ctx):
    """``h = self.cell(x, self.h); self.h = h`` inside a manual capture: the graph reads the tensor
    ``self.h`` held at capture on every replay, so the new state is never read back (the recurrence does
    not advance). Written in place (``self.h.copy_(h)``), it would be."""
    if region.klass != "manual":
        return
    reads: dict[tuple, int] = {}  # (class, attr) -> first line the captured code reads it
    stores = []
    for facts, (lo, hi), chain in region.reached:
        if facts.cls is None:
            continue
        guarded = _none_checked(facts)
        for node in facts.self_loads:
            if lo <= node.lineno <= hi and id(node) not in guarded:
                key = (id(facts.cls), node.attr)
                reads[key] = min(reads.get(key, node.lineno), node.lineno)
        for store in facts.self_stores:
            if lo <= store.stmt.lineno <= hi and store.value is not None and (
                    is_tensor(store.kind) or is_tensor(attr_kind(facts.cls, store.attr, ctx.project))):
                stores.append((facts, store, chain))
    for facts, store, chain in stores:
        first = reads.get((id(facts.cls), store.attr))
        if first is not None and first < store.stmt.lineno and ctx.once(("state", id(store.stmt))):
            yield found(store.stmt, module=facts.module, chain=chain, what=f"self.{store.attr}", line=region.line,
                        how="rebound inside the captured code")


_METADATA = frozenset(("dtype", "shape", "device", "ndim", "is_cuda", "size", "dim", "numel"))


def _none_checked(facts) -> set:
    """``self.x`` read only for what it is, not for its data: tested against None (``if self.cache is
    None:``), or asked its dtype, shape or device (``if self.k.dtype != k.dtype:``)."""
    out = set()
    for node in ast.walk(facts.fref.node):
        if type(node) is ast.Compare and len(node.ops) == 1 and type(node.ops[0]) in (ast.Is, ast.IsNot):
            out.update(id(side) for side in (node.left, *node.comparators) if type(side) is ast.Attribute)
        elif type(node) is ast.Attribute and node.attr in _METADATA and type(node.value) is ast.Attribute:
            out.add(id(node.value))
    return out


@RULES.also("CG405", Region())
def rebound_runner_input(region, ctx):
    """A runner's static input (``self.positions``, read by the capture) rebound in the method that
    replays (``self.positions = meta.positions``) instead of refilled with ``copy_()``."""
    around = near.around(region, ctx)
    if around is None or around.facts.self_name is None or around.facts.cls is None:
        return
    sf = around.facts
    inputs = _runner_inputs(region, ctx, around)
    containers = _input_containers(region, ctx, around)
    for facts, spans in near.replay_sites(region, ctx):
        if facts.cls is not sf.cls:
            continue
        for store in facts.self_stores:
            line = store.stmt.lineno
            if store.attr in inputs and store.value is not None and any(lo <= line <= hi for lo, hi in spans):
                yield found(store.stmt, module=facts.module, what=f"self.{store.attr}", line=region.line, how="rebound")
        if facts.fref.key == region.scope.key:
            continue  # the capturing function files its inputs away after the capture
        for target, stmt in facts.item_stores:
            if type(stmt) is ast.Assign and text_of(target.value) in containers \
                    and any(lo <= stmt.lineno <= hi for lo, hi in spans):
                yield found(stmt, module=facts.module, what=text_of(target), line=region.line, how="rebound")


def _input_containers(region, ctx, around) -> set[str]:
    """The runner's containers that hold the capture's inputs: where the capturing method files a tensor
    the capture reads (``self.inputs[n] = x``), and containers of tensors whose entries it reads."""
    sf = around.facts
    containers = set()
    for name in around.reads:
        if is_tensor(near.kind_before(sf, name, around.rs)):
            containers |= {c for c in near.kept_in(region, ctx, name) if c.startswith(f"{sf.self_name}.")}
    containers |= _tensor_containers_read(region, ctx, sf)
    # ``self.tokens[slot] = q`` writes into a tensor, in place: a container is what is not a tensor
    return {c for c in containers if not is_tensor(attr_kind(sf.cls, c.split(".", 1)[1], ctx.project))}


def _tensor_containers_read(region, ctx, sf) -> set[str]:
    """The runner's containers of tensors whose entries the capture reads: ``x = self.inputs[b]`` in the
    capturing method or in a method of the runner it runs, where some method of the class fills the
    container's entries with tensors (``self.inputs[b] = torch.zeros(b, n, device=dev)``)."""
    read = set()
    for facts, (lo, hi), _chain in region.reached:
        if facts.cls is not sf.cls:
            continue
        for node, _stmt in facts.subscripts:
            if lo <= node.lineno <= hi and type(node.value) is ast.Attribute and is_self_attr(node.value, facts.self_name):
                read.add(node.value.attr)
    filled = set()
    for name, node in sf.cls.methods.items() if read else ():
        facts = facts_of(ctx.project, FuncRef(sf.cls.module, node, sf.cls, name))
        for target, stmt in facts.item_stores:
            owner = target.value
            if type(owner) is ast.Attribute and owner.attr in read and is_self_attr(owner, facts.self_name) \
                    and type(stmt) is ast.Assign and is_tensor(facts.infer(stmt.value)):
                filled.add(owner.attr)
    return {f"{sf.self_name}.{attr}" for attr in filled}


def _runner_inputs(region, ctx, around) -> set[str]:
    """The tensor attributes of ``self`` that a runner's capture reads: in the capturing method, through
    local names and local functions, and in the runner's own methods that the capture runs."""
    sf = around.facts
    inputs = {n.attr for n in sf.self_loads if around.start <= n.lineno <= around.end
              and is_tensor(attr_kind(sf.cls, n.attr, ctx.project))}
    inputs |= _runner_attrs_behind(sf, around)  # ``ids = self.input_ids[:bs]`` then captured with ids
    inputs |= {attr for attr in _runner_attrs_in_local_defs(sf, around)
               if is_tensor(attr_kind(sf.cls, attr, ctx.project))}  # ``def run_once(): ... self.ids[:bs]``
    for facts, _span, _chain in region.reached:  # the runner's own methods that the capture runs
        if facts.cls is sf.cls and facts.fref.key != sf.fref.key:
            inputs |= {n.attr for n in facts.self_loads if is_tensor(attr_kind(sf.cls, n.attr, ctx.project))}
    return inputs


@RULES.also("CG405", Region())
def runner_input_replaced_by_another_method(region, ctx):
    """A runner's static input replaced by another of its methods (``refresh_items``: ``self.item_emb =
    normalize(new)``) while the graph captured with it goes on replaying: a method that does not capture
    again (itself or through the runner's other methods), is not the capture's own, and does not replay
    (those are checked above)."""
    if region.klass == "compile":
        return
    around = near.around(region, ctx)
    if around is None or around.facts.self_name is None or around.facts.cls is None or region.scope is None:
        return
    graph = text_of(region.graph_expr) if region.graph_expr is not None else ""
    held = {graph} | (near.kept_in(region, ctx, graph) if graph else set())  # ``self.entries[n] = (g, out)``
    if not any(name.startswith(f"{around.facts.self_name}.") for name in held):
        return  # a graph local to the capturing method does not outlive it: no other method runs between its replays
    replaying = {facts.fref.name for facts, _spans in near.replay_sites(region, ctx) if facts.cls is around.facts.cls}
    if not replaying:
        return
    cls, inputs = around.facts.cls, _runner_inputs(region, ctx, around)
    methods = {name: facts_of(ctx.project, FuncRef(cls.module, node, cls, name)) for name, node in cls.methods.items()}
    captures = {region.scope.name}
    while True:  # the methods that capture again, directly or through another method of the runner
        more = {name for name, facts in methods.items() if name not in captures
                and any(c.meth in captures and is_self_attr(c.node.func, facts.self_name) for c in facts.calls)}
        if not more:
            break
        captures |= more
    runs = {facts.fref.name for facts, _span, _chain in region.reached if facts.cls is cls}
    setup = {c.meth for name in near.CONSTRUCTION if name in methods  # what the constructor runs
             for c in methods[name].calls if is_self_attr(c.node.func, methods[name].self_name)}
    containers = _input_containers(region, ctx, around)
    for name, facts in methods.items():
        if name in near.CONSTRUCTION or name in captures or name in runs or name in replaying or name in setup \
                or ctx.captures_in(facts.fref):
            continue  # set-up that runs before any capture, the captures (this one, new ones), and what replays
        how = f"replaced by `{cls.name}.{name}()` while the graph goes on replaying"
        for store in facts.self_stores:
            value = store.value
            if store.attr in inputs and value is not None and not (type(value) is ast.Constant and value.value is None):
                yield found(store.stmt, module=facts.module, what=f"self.{store.attr}", line=region.line, how=how)
        for target, stmt in facts.item_stores:  # ``self.static_tel[b] = torch.zeros(...)``: an entry replaced
            if type(stmt) is ast.Assign and text_of(target.value) in containers:
                yield found(stmt, module=facts.module, what=text_of(target), line=region.line, how=how)


@RULES.also("CG405", Region())
def runner_input_replaced_from_outside(region, ctx):
    """A runner's static input replaced through the runner object by a function of the file that is not
    one of its methods (``def swap_table(step, table): step.items = table.cuda()``, ``runner.mix = chunk``
    before ``runner.graph.replay()``), where that function runs while the graph is in use."""
    if region.klass != "manual":
        return
    around = near.around(region, ctx)
    if around is None or around.facts.self_name is None or around.facts.cls is None:
        return
    cls = around.facts.cls
    inputs = _runner_inputs(region, ctx, around)
    for fref in callers.functions_of(region.module) if inputs else ():
        if fref.cls is cls or type(fref.node) is ast.Module or not near.assigns_attribute(callers.source_of(fref), inputs):
            continue
        after = near.lines_after_capture(fref, region, ctx)
        if after is None:
            continue
        callers.seed_from_callers(fref, ctx.project)
        facts = facts_of(ctx.project, fref)
        for owner, attr, stmt in facts.attr_stores:
            kind = facts.infer(owner)
            if attr in inputs and stmt.lineno > after and type(kind) is tuple and kind[0] == "inst" \
                    and cls in kind[1].mro(ctx.project) and type(stmt) is ast.Assign \
                    and not (type(stmt.value) is ast.Constant and stmt.value.value is None):
                yield found(stmt, module=facts.module, what=f"{owner.id}.{attr}", line=region.line,
                            how=f"replaced by `{fref.name}()` while the graph goes on replaying")


@RULES.also("CG405", Region())
def runner_parameters_replaced(region, ctx):
    """A runner's method that gives the parameters of the model its capture runs new storage (``for n, p in
    self.model.named_parameters(): p.data = state[n].cuda()``) while the graph goes on replaying: the replays
    keep reading the old storage. ``p.data.copy_(...)`` or ``load_state_dict`` write in place."""
    if region.klass != "manual":
        return
    around = near.around(region, ctx)
    if around is None or around.facts.self_name is None or around.facts.cls is None or region.scope is None:
        return
    cls = around.facts.cls
    models = set()  # ``self.model`` read by the capture, there or in the runner's methods it runs
    for facts, (lo, hi), _chain in region.reached:
        if facts.cls is cls:
            models |= {f"{facts.self_name}.{n.attr}" for n in facts.self_loads if lo <= n.lineno <= hi}
    if not any(facts.cls is cls for facts, _spans in near.replay_sites(region, ctx)):
        return  # no method replays the graph: nothing runs between replays
    methods = {name: facts_of(ctx.project, FuncRef(cls.module, node, cls, name)) for name, node in cls.methods.items()}
    setup = {c.meth for name in near.CONSTRUCTION if name in methods  # what the constructor runs, before any capture
             for c in methods[name].calls if is_self_attr(c.node.func, methods[name].self_name)}
    for name, facts in methods.items():
        if name == region.scope.name or name in near.CONSTRUCTION or name in setup or ctx.captures_in(facts.fref):
            continue
        after = near.lines_after_capture(facts.fref, region, ctx)  # None: it does not run while the graph is in use
        if after is not None and not _called_after_capture(facts.fref, region, ctx):
            continue
        for owner, attr, stmt in facts.attr_stores:
            if attr == "data" and after is not None and stmt.lineno > after and _iterates_parameters(facts, owner.id, models):
                yield found(stmt, module=facts.module, what=f"{owner.id}.data", line=region.line,
                            how=f"replaced by `{cls.name}.{name}()` while the graph goes on replaying")


def _called_after_capture(fref, region, ctx) -> bool:
    """A method that nothing in view calls (an entry point, run whenever), or one called in a loop or below
    a call of the capturing method (``runner.capture()`` then ``runner.reload(state)``); not one called only
    above the capture (``runner.use_ema_weights()`` then ``runner.capture()``)."""
    sites = list(callers.call_sites(ctx.project, fref.name, fref))
    if not sites:
        return True
    capture = region.scope.name
    for caller, call in sites:
        facts = facts_of(ctx.project, caller)
        if any(lp.lineno <= call.lineno <= lp.end_lineno for lp in facts.loops) or any(
                c.meth == capture and c.node.lineno < call.lineno for c in facts.calls):
            return True
    return False


@RULES.also("CG405", Region())
def decorated_method_input_replaced(region, ctx):
    """A method a decorator captures on its first call and replays after (``@graphed_once def
    predict(self)``) reads a tensor of its object that another method replaces (``update_obs``:
    ``self.obs_values = torch.as_tensor(new)``): replays keep reading the tensor captured the first time."""
    for passed in region.passed:
        target = passed.target
        if not passed.helper.startswith("@") or target.cls is None:
            continue
        cls = target.cls
        inputs = set()
        runs = set()
        for facts, _span, _chain in region.reached:
            if facts.cls is cls:
                runs.add(facts.fref.name)
                inputs |= {n.attr for n in facts.self_loads if is_tensor(attr_kind(cls, n.attr, ctx.project))}
        for name, node in cls.methods.items():
            if name in runs or name in near.CONSTRUCTION:
                continue
            facts = facts_of(ctx.project, FuncRef(cls.module, node, cls, name))
            for store in facts.self_stores:
                value = store.value
                if store.attr in inputs and value is not None and not (type(value) is ast.Constant and value.value is None):
                    yield found(store.stmt, module=facts.module, what=f"self.{store.attr}", line=region.line,
                                how=f"replaced by `{cls.name}.{name}()` while the graph goes on replaying")


@RULES.also("CG405", Region())
def compiled_module_state_rebound(region, ctx):
    """A tensor attribute that the compiled code reads on its module (``self.lora_A`` in ``forward``),
    replaced by another method of that class (``set_adapter``) instead of refilled in place, where that
    method is called in a loop that calls the compiled function: between two calls. (A setup method run
    once before the calls, like a KV-cache setup, costs one re-recording and is not reported.)"""
    if region.klass != "compile":
        return
    between_calls = {c.meth for inv in near.invocations(region, ctx) for c in inv.facts.calls
                     if c.meth and any(lo <= c.node.lineno <= hi for lo, hi in inv.loops)}
    reads: dict[int, tuple] = {}  # class -> (class, attributes read, methods the region runs)
    for facts, _span, _chain in region.reached:
        if facts.cls is not None and facts.self_name:
            cls, attrs, methods = reads.setdefault(id(facts.cls), (facts.cls, set(), set()))
            attrs.update(n.attr for n in facts.self_loads)
            methods.add(facts.fref.name)
    for cls, attrs, methods in reads.values():
        for name, node in cls.methods.items():
            if name in methods or name in near.CONSTRUCTION or name not in between_calls:
                continue
            facts = facts_of(ctx.project, FuncRef(cls.module, node, cls, name))
            for store in facts.self_stores:
                if store.attr in attrs and store.value is not None \
                        and is_tensor(attr_kind(cls, store.attr, ctx.project)):
                    yield found(store.stmt, module=facts.module, what=f"self.{store.attr}", line=region.line,
                                how=f"replaced by `{cls.name}.{name}()`")


@RULES.also("CG405", Region())
def compiled_model_state_replaced_by_holder(region, ctx):
    """The object that compiles a model (``self.model = torch.compile(model, ...)`` in a trainer's
    ``__init__``, with ``self.base = model``) replacing, in another of its methods, a tensor that the
    compiled forward reads: ``self.base.num_mu = new_stats``, or ``p.data = new`` for ``p`` in
    ``self.base.parameters()``. That method runs after the compile, between calls."""
    if region.klass != "compile" or region.scope is None or region.scope.cls is None:
        return
    call = region.node
    if type(call) is not ast.Call or not call.args:
        return
    holder = facts_of(ctx.project, region.scope)
    roots = {text_of(module_itself(call.args[0]))}
    roots |= _stepped_models(holder, call.args[0])  # ``torch.compile(self.opt.step)``: the model it updates
    aliases = {f"{holder.self_name}.{s.attr}" for s in holder.self_stores
               if s.value is not None and text_of(module_itself(s.value)) in roots}
    aliases |= {root for root in roots if root and root.startswith(f"{holder.self_name}.")}
    if not aliases:
        return
    read = set()  # tensors the compiled code reads on the modules it runs
    for facts, _span, _chain in region.reached:
        if facts.cls is not None and facts.self_name and facts.cls.is_module(ctx.project):
            read |= {n.attr for n in facts.self_loads if is_tensor(attr_kind(facts.cls, n.attr, ctx.project))}
    cls = region.scope.cls
    for name, node in cls.methods.items():
        if name == region.scope.name or name in near.CONSTRUCTION:
            continue
        facts = facts_of(ctx.project, FuncRef(cls.module, node, cls, name))
        how = f"replaced by `{cls.name}.{name}()`"
        for owner, attr, stmt in facts.held_stores:
            if text_of(owner) in aliases and attr in read:
                yield found(stmt, module=facts.module, what=f"{text_of(owner)}.{attr}", line=region.line, how=how)
        for owner, attr, stmt in facts.attr_stores:
            if attr == "data" and _iterates_parameters(facts, owner.id, aliases):
                yield found(stmt, module=facts.module, what=f"{owner.id}.data", line=region.line, how=how)


@RULES.also("CG405", Region())
def module_tensor_replaced_at_run_time(region, ctx):
    """A tensor that the region's modules read (``self.hour_prior`` in a ``forward``), or a parameter of a
    graphed or compiled model (``model.embed.weight``), given a new tensor by code of the file that runs
    while the graph is in use: ``self.model.hour_prior = prior.cuda()`` in a refresh method,
    ``model.axis_bias = torch.as_tensor(...)`` in a recalibration, ``head.proj.weight =
    nn.Parameter(w)``. The graph keeps the old tensor's address (a compiled one records again)."""
    if region.klass not in ("manual", "compile"):
        return
    read = set()  # tensor attributes the region reads on the modules it runs
    for facts, _span, _chain in region.reached:
        if facts.cls is not None and facts.self_name and facts.cls.is_module(ctx.project):
            read |= {n.attr for n in facts.self_loads if is_tensor(attr_kind(facts.cls, n.attr, ctx.project))}
        for n in facts.attr_loads:  # ``model.templates`` in a compiled function taking the model
            cls = near.instance_class(facts, facts.infer(n.value)) or near.only_class_setting(facts.module, n.attr, ctx)
            if cls is not None and cls.is_module(ctx.project) and is_tensor(attr_kind(cls, n.attr, ctx.project)):
                read.add(n.attr)
    models = {text_of(module_itself(t)) for t in region.targets} - {None}
    parts = _parts_called(region, ctx)  # ``self.head(feats)`` in the captured code: (class, "head")
    if not read and not models and not parts:
        return
    for fref in callers.functions_of(region.module):
        text = callers.source_of(fref)
        if not near.assigns_attribute(text, read) and not ((models or parts) and ("Parameter(" in text or ".data =" in text)):
            continue  # no store of a tensor the region reads, and no new parameter: nothing to look at
        after = near.lines_after_capture(fref, region, ctx)
        if after is None:
            continue
        facts = facts_of(ctx.project, fref)
        for owner, attr, stmt in [*facts.held_stores, *facts.attr_stores]:
            owner_text = text_of(owner)
            if owner_text is None or stmt.lineno <= after or near.configured_here(facts, owner, stmt, region):
                continue
            value = getattr(stmt, "value", None)
            parameter = _new_parameter(facts, value) or (  # ``model.embed.weight.data = vectors.cuda()``
                attr == "data" and "." in owner_text and _new_tensor(facts, value))
            if (attr in read and _new_tensor(facts, value)) or (
                    parameter and any(owner_text == m or owner_text.startswith(f"{m}.") for m in models)) or (
                    parameter and _held_part(facts, owner) in parts):
                if ctx.once(("replaced", id(stmt))):
                    yield found(stmt, module=facts.module, what=f"{owner_text}.{attr}", line=region.line,
                                how=f"given a new tensor by `{fref.display}`")


def _parts_called(region, ctx) -> set[tuple]:
    """The torch modules the captured code calls as parts of its runner or model (``self.head(feats)``),
    as (class, attribute): a new parameter given to one (``self.head.weight = nn.Parameter(w)``) is a new
    address the graph does not read."""
    parts = set()
    for facts, _span, _chain in region.reached:
        if facts.cls is None or not facts.self_name:
            continue
        for c in facts.calls:
            func = c.node.func
            if type(func) is ast.Attribute and type(func.value) is ast.Name and func.value.id == facts.self_name:
                kind = attr_kind(facts.cls, func.attr, ctx.project)
                if type(kind) is tuple and (kind[0] == "nn" or (kind[0] == "inst" and kind[1].is_module(ctx.project))):
                    parts.add((facts.cls, func.attr))
    return parts


def _held_part(facts, owner) -> tuple | None:
    """``(class, "head")`` for ``self.head`` in a method of that class."""
    if type(owner) is ast.Attribute and type(owner.value) is ast.Name and owner.value.id == facts.self_name \
            and facts.cls is not None:
        return (facts.cls, owner.attr)
    return None


def _new_tensor(facts, value) -> bool:
    """A new object for a tensor attribute: anything but None (freeing it) or a Python number, flag or
    string, or an object the checker knows is not a tensor."""
    if value is None or type(value) is ast.Constant or near.scalar_literal(value):
        return False
    kind = facts.infer(value)
    return kind is None or is_tensor(kind)


def _new_parameter(facts, value) -> bool:
    return type(value) is ast.Call and facts.qual(value.func) in ("torch.nn.Parameter", "torch.nn.parameter.Parameter")


def _fix_up_once(f, stmt, attr: str) -> bool:
    """``if self.k.dtype != k.dtype: self.k = self.k.to(k.dtype)``: a conversion guarded by a test on the
    attribute itself runs once (the first call makes the test false), like a lazy cache."""
    for node in ast.walk(f.fref.node):
        if type(node) is ast.If and node.body and node.body[0].lineno <= stmt.lineno <= node.body[-1].end_lineno:
            for n in ast.walk(node.test):
                if type(n) is ast.Attribute and n.attr == attr and type(n.value) is ast.Name and n.value.id == f.self_name:
                    return True
    return False


def _runner_attrs_in_local_defs(sf, around) -> set[str]:
    """Attributes of ``self`` read by functions defined in the capturing method and called in the capture
    (``def run_once(): return self.model(self.input_ids[:bs])``, then ``out = run_once()`` in the region)."""
    called = {c.node.func.id for c in sf.calls if type(c.node.func) is ast.Name and c.node.func.id in sf.local_defs
              and around.rs <= c.node.lineno <= around.re}
    out = set()
    for name in called:
        inner = facts_of(sf.project, sf.project.local_def(sf, name))
        out |= {n.attr for n in inner.self_loads}
    return out


def _runner_attrs_behind(sf, around) -> set[str]:
    """Attributes whose views the capture reads through local names bound above it."""
    out = set()
    for name in around.reads:
        stores = [s for s in sf.stores if s.name == name and s.node.lineno < around.rs]
        if not stores:
            continue
        node = stores[-1].node
        value = getattr(node, "value", None)
        values = [value]
        if type(node) is ast.Assign and type(node.targets[0]) is ast.Tuple and type(value) is ast.Tuple:
            names = [t.id if type(t) is ast.Name else None for t in node.targets[0].elts]
            values = [value.elts[names.index(name)]] if name in names and len(value.elts) == len(names) else []
        if len(values) == 1 and type(values[0]) in (ast.Tuple, ast.List):  # ``args = (self.atoms, self.src)``
            values = list(values[0].elts)
        for v in values:
            while type(v) is ast.Subscript:
                v = v.value
            if type(v) is ast.Attribute and type(v.value) is ast.Name and v.value.id == sf.self_name:
                out.add(v.attr)
    return out


@RULES.also("CG405", Region())
def rebound_input_of_helper(region, ctx):
    """A tensor handed to a capture helper (``graph_capture(fn, (x, w))``) and rebound after the call."""
    seen = set()
    for passed in region.passed:
        facts = facts_of(ctx.project, passed.caller)
        call = passed.call
        if type(call) is not ast.Call:
            continue  # a decorator: nothing is passed but the function
        names = []
        for arg in [*call.args, *(kw.value for kw in call.keywords)]:
            items = arg.elts if type(arg) in (ast.Tuple, ast.List) else [arg]
            names.extend(item.id for item in items if type(item) is ast.Name)
        for name in names:
            if (id(call), name) in seen or not is_tensor(facts.kind_of_name(name, (call.lineno, call.col_offset))):
                continue
            for s in facts.stores:
                if s.name == name and s.node.lineno > call.end_lineno and not s.aug:
                    seen.add((id(call), name))
                    yield found(s.node, module=facts.module, what=name, line=call.lineno, how="rebound")
                    break


@RULES.rule(
    Rule(
        code="CG406",
        name="state-rebound-in-region",
        category="static-address",
        message="`{what}` is replaced by a new tensor inside the region: replays read the original and the update is lost",
        fix="Update the buffer in place: `{what}.copy_(...)`, `.mul_()`, `.add_()`.",
        compile="error",
        compile_message="`{what}` is replaced by a new tensor inside a CUDA-graph-compiled region: the next "
        "call reads the previous call's output, which that call overwrote (\"accessing tensor output of CUDAGraphs "
        "that has been overwritten by a subsequent run\")",
        what="Checks for module state (`self.x = f(self.x)`) rebound to a new tensor inside a captured region, "
        "and parameters given new storage there (`p.data = saved[p]` in a captured optimizer step).",
        why="Inside capture, the new tensor is allocated from the graph's memory pool and the attribute "
        "is pointed at it once. Every replay recomputes from the tensor the graph read at capture "
        "(the old buffer), so running statistics or caches never accumulate. Under "
        "`torch.compile(mode=\"reduce-overhead\")` the attribute holds an output of the previous call, and "
        "reading it in the next call raises the cudagraph-tree overwrite error (measured with torch 2.11 on an "
        "H200, benchmarks/compile_hazards.py).",
        example=code("""
            import torch

            class Accumulate(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer("total", torch.zeros(4, device="cuda"))

                def forward(self, x):
                    self.total = self.total + x
                    return self.total

            m = Accumulate()
            x = torch.ones(4, device="cuda")
            m(x)  # warm-up
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                out = m(x)
            for _ in range(3):
                g.replay()
        """),
        use_instead=code("""
            import torch

            class Accumulate(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer("total", torch.zeros(4, device="cuda"))

                def forward(self, x):
                    self.total.add_(x)  # in place: every replay accumulates
                    return self.total

            m = Accumulate()
            x = torch.ones(4, device="cuda")
            m(x)  # warm-up
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                out = m(x)
            for _ in range(3):
                g.replay()
        """),
        gpu_check="torch.cuda.synchronize()\nok = torch.equal(out, torch.full((4,), 4.0, device='cuda'))  # warm-up + 3 replays",
    ),
    Each("self_stores"),
)
def state_rebound_in_region(item, f):
    attr, stmt, value, _kind = item
    if type(stmt) is ast.AugAssign or value is None or not _reads_self_attr(value, f.self_name, attr):
        return
    if _fix_up_once(f, stmt, attr):
        return
    kind = attr_kind(f.cls, attr, f.project) if f.cls is not None else None
    if is_tensor(kind) or is_tensor(f.infer(value)):
        yield found(stmt, stmt, what=f"self.{attr}")


@RULES.also("CG406", Region())
def parameter_storage_swapped_in_capture(region, ctx):
    """``p.data = self.state[p]["old_p"]`` in a captured step (SAM's second step): the swap happens once,
    at capture, and replays keep writing the storage the graph recorded."""
    if region.klass != "manual":
        return
    for facts, span, _chain in region.reached:
        for owner, attr, stmt in facts.attr_stores:
            if attr != "data" or type(stmt) is not ast.Assign or (span and not span[0] <= stmt.lineno <= span[1]):
                continue
            if _iterates_parameters(facts, owner.id) or is_tensor(facts.infer(owner)):
                yield found(stmt, module=facts.module, what=f"{owner.id}.data")


def _stepped_models(holder, compiled) -> set[str]:
    """``torch.compile(self.opt.step)`` with ``self.opt = torch.optim.SGD(model.parameters(), ...)``: the
    models whose parameters the compiled step updates (``model``), as the holder names them."""
    if type(compiled) is not ast.Attribute or compiled.attr != "step" or not is_self_attr(compiled.value, holder.self_name):
        return set()
    out = set()
    for store in holder.self_stores:
        value = store.value
        if store.attr == compiled.value.attr and type(value) is ast.Call and value.args:
            first = value.args[0]
            if type(first) is ast.Call and type(first.func) is ast.Attribute and first.func.attr == "parameters":
                out.add(text_of(module_itself(first.func.value)))
    return out - {None}


def _iterates_parameters(facts, name: str, models: set[str] | None = None) -> bool:
    """``name`` is the loop variable of ``for p in model.parameters()`` (of one of ``models``, when given) or,
    with no ``models``, of ``for p in group["params"]``."""
    for s in facts.stores:
        if s.name != name or not s.loop_target:
            continue
        for n in ast.walk(getattr(s.node, "iter", None) or ast.Pass()):
            if type(n) is ast.Call and type(n.func) is ast.Attribute and n.func.attr in ("parameters", "named_parameters") \
                    and (models is None or text_of(n.func.value) in models):
                return True
            if models is None and type(n) is ast.Subscript and type(n.slice) is ast.Constant and n.slice.value == "params":
                return True
    return False


@RULES.rule(
    Rule(
        code="CG407",
        name="output-kept-without-clone",
        trace=None,
        trace_blind="keeping a graph output past the next replay happens after the region, in Python: a run has nothing to record; cgkit check reports it",
        category="static-address",
        message="graph output `{what}` is kept here without `.clone()`: the next replay overwrites it",
        compile_message="output `{what}` of a CUDA-graph-compiled call is kept past the next call{detail}: "
        "that call overwrites it (\"accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run\")",
        fix="Store a copy: `{what}.clone()` (or copy the values you need to the host after the replay).",
        compile="error",
        what="Checks for graph outputs kept across replays without a copy: appended or put in a "
        "container inside a loop that replays the graph, and, for `torch.compile` with CUDA graphs, "
        "outputs of a compiled call that are kept (in a list, a container, an attribute or a variable "
        "read again, or fed back as the next call's input: `x = step(x, u)` in a loop) past the next call "
        "of a compiled function. Outputs handed out by the code that replays are followed to where they are kept: "
        "a runner's method or a wrapper's `__call__`, the replay closure a capture helper returns, an output the "
        "capturing function makes `global`, a tuple a capture helper caches and hands back (`cache[key] = "
        "(g, x, out)`; `return cache[key]`). Keeping the static outputs of a "
        "manual graph on its runner object once, the usual pattern, is not reported, nor are outputs of calls "
        "made with CPU tensors only (no CUDA graph is recorded for them).",
        why="A graph writes its outputs to the same memory on every replay. Keeping a reference to "
        "an output and replaying again overwrites the kept value: a list of per-step results ends up "
        "holding the last step's values many times. CUDA graph trees (`mode=\"reduce-overhead\"`) "
        "reuse output memory the same way, and raise an error when an overwritten output is read: measured "
        "on torch 2.11 (H200, benchmarks/compile_hazards.py) for an output kept in a list across calls, one "
        "kept in a variable across the next call, and one kept across a call of another compiled function. "
        "In a training step, while the backward is pending, the trees keep the forward's outputs: an "
        "output passed to another compiled function and read before `backward()` raised nothing "
        "(benchmarks/heldout3_disputes.py), and such reads are not reported.",
        example=code("""
            import torch

            static_x = torch.zeros(4, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = static_x + 1
            outputs = []
            for step in range(3):
                static_x.fill_(step)
                g.replay()
                outputs.append(y)
        """),
        use_instead=code("""
            import torch

            static_x = torch.zeros(4, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = static_x + 1
            outputs = []
            for step in range(3):
                static_x.fill_(step)
                g.replay()
                outputs.append(y.clone())
        """),
        gpu_check="torch.cuda.synchronize()\nok = [float(o[0]) for o in outputs] == [1.0, 2.0, 3.0]",
    ),
    Region(),
)
def output_kept_without_clone(region, ctx):
    """An output of a manual capture put in a container in a loop that replays the graph."""
    around = near.around(region, ctx)
    if around is None:
        return
    sf = around.facts
    replay_loops = [(lp.lineno, lp.end_lineno) for lp in sf.loops
                    if any(c.meth == "replay" and lp.lineno <= c.node.lineno <= lp.end_lineno for c in sf.calls)]
    for name, stmt in sf.escapes:
        line = stmt.lineno
        if name not in around.stores or (around.rs <= line <= around.re) or not around.later(line):
            continue
        if not any(lo <= line <= hi for lo, hi in replay_loops):
            continue  # kept once (the runner's static outputs): the usual manual pattern
        if _last_binding_line(sf, name, line) <= around.re:  # still the region's own output
            yield found(stmt, what=name)


@RULES.also("CG407", Region())
def output_kept_elsewhere(region, ctx):
    """Outputs of a capture kept across replays outside the capturing function: returned by a capture
    helper (``g, x, y = capture(model)`` then ``results.append(y)`` in the replay loop), or stored on
    the runner (``self.static_out``) and appended in the method that replays."""
    around = near.around(region, ctx)
    if around is None:
        return
    outputs = set(around.stores)
    returned = near.returned_positions(region.scope.node, outputs) if type(region.scope.node) is not ast.Module else {}
    if returned:
        for fref, call in callers.call_sites(ctx.project, region.scope.name, region.scope):
            facts = facts_of(ctx.project, fref)
            kept = near.bound_from(facts, call, returned)
            loops = _replay_loops(facts)
            for name, stmt in facts.escapes:
                if name in kept and any(lo <= stmt.lineno <= hi for lo, hi in loops):
                    yield found(stmt, module=facts.module, what=name)
    if _returns_output_name(region, ctx, outputs):  # a capturing decorator's wrapper returns the static output
        for passed in region.passed:
            if passed.helper.startswith("@"):
                yield from _kept_by_callers(facts_of(ctx.project, passed.target), ctx)
    closure = _replaying_closure(region, outputs)
    if closure is not None:  # ``head_fn = capture_graph(head, h)`` returns ``def replay(*a): ...; return static_out``
        for fref, call in callers.call_sites(ctx.project, region.scope.name, region.scope):
            facts = facts_of(ctx.project, fref)
            bound = near.bound_from(facts, call, {None: closure.name})  # ``head_fn = capture_graph(...)``
            sites = [(fref, c.node) for c in facts.calls if type(c.node.func) is ast.Name and c.node.func.id in bound]
            yield from _kept_by_callers(facts_of(ctx.project, closure), ctx, sites)
    attrs = _outputs_on_self(region, ctx, around, outputs) | _outputs_in_globals(region, outputs)
    if attrs:
        for facts, loops in near.replay_sites(region, ctx):
            views = _views_of(facts, attrs)
            for c in facts.calls:
                if c.meth in ("append", "extend", "insert") and any(lo <= c.node.lineno <= hi for lo, hi in loops):
                    for arg in c.node.args:
                        items = arg.elts if type(arg) in (ast.Tuple, ast.List) else [arg]  # append((self.a, self.b))
                        kept = [text_of(item) for item in items if _output_base(item, attrs, views)]
                        if kept:
                            yield found(c.stmt, module=facts.module, what=kept[0])
            if _returns_output(facts, attrs, views):
                yield from _kept_by_callers(facts, ctx)


def _replaying_closure(region, outputs: set[str]):
    """The function the capturing function defines and returns (``return replay``) that hands back one of
    the capture's outputs (``def replay(*new_args): ...; g.replay(); return static_out``), as a FuncRef."""
    node = region.scope.node if region.scope is not None else None
    if node is None or type(node) is ast.Module:
        return None
    returned = {r.value.id for r in ast.walk(node) if type(r) is ast.Return and type(r.value) is ast.Name}
    for inner in node.body:
        if type(inner) in (ast.FunctionDef, ast.AsyncFunctionDef) and inner.name in returned and any(
                type(r) is ast.Return and type(r.value) is ast.Name and r.value.id in outputs for r in ast.walk(inner)):
            return FuncRef(region.scope.module, inner, None, inner.name)
    return None


def _returns_output_name(region, ctx, outputs: set[str]) -> bool:
    """The capturing function returns one of the capture's outputs (``return static_out``), or the
    attribute it keeps one in (``self._out = static_out`` ... ``return self._out``)."""
    node = region.scope.node if region.scope is not None else None
    if node is None or type(node) is ast.Module:
        return False
    held = set(outputs)
    for name in outputs:
        held |= near.kept_in(region, ctx, name)
    held |= {text_of(t) for a in ast.walk(node) if type(a) is ast.Assign and type(a.value) is ast.Name
             and a.value.id in outputs for t in a.targets if type(t) is ast.Attribute}
    around = near.around(region, ctx)
    if around is not None:  # ``state["out"] = fn(*args)`` in the capture, then ``return state["out"]``
        held |= {text_of(target) for target, stmt in around.facts.item_stores
                 if around.start <= stmt.lineno <= around.end and type(stmt) is ast.Assign}
    return any(type(r) is ast.Return and r.value is not None and text_of(r.value) in held for r in ast.walk(node))


def _returns_output(facts, attrs: set[str], views: set[str]) -> bool:
    """The replaying method hands back the graph's outputs: ``return self.out[b][:n]``, ``return
    self.static_out[n]`` (a tuple of them), ``return logits``."""
    node = facts.fref.node
    if type(node) is ast.Module:
        return False
    for ret in (n for n in ast.walk(node) if type(n) is ast.Return and n.value is not None):
        parts = ret.value.elts if type(ret.value) is ast.Tuple else [ret.value]
        if any(_output_base(part, attrs, views) for part in parts):
            return True
    return False


def _kept_by_callers(replayer, ctx, sites=None):
    """Callers that keep what a replaying method returns across its next call: ``for ...:
    self.history.append(self.forecast(h))``, or ``aod, _ = self.run(x)`` then ``products.append(aod)``.
    ``sites``: the calls of it, where they are not found by its name."""
    name = replayer.fref.name
    if sites is None:
        sites = _instance_calls(replayer.fref, ctx) if name == "__call__" else \
            callers.call_sites(ctx.project, name, replayer.fref)
    for fref, call in sites:
        facts = facts_of(ctx.project, fref)
        loops = [(lp.lineno, lp.end_lineno) for lp in facts.loops if lp.lineno <= call.lineno <= lp.end_lineno]
        if loops:
            lo, hi = loops[-1]
        else:  # one call per call of the caller: kept across calls only in what outlives the caller
            lo, hi = call.lineno, facts.fref.node.end_lineno if type(facts.fref.node) is not ast.Module else 1 << 30
        bound = set()
        for stmt in ast.walk(facts.fref.node):
            if type(stmt) is ast.Assign and stmt.value is call:
                bound |= {n.id for t in stmt.targets for n in ast.walk(t) if type(n) is ast.Name}
        for c in facts.calls:
            if c.meth not in ("append", "extend", "insert") or not lo <= c.node.lineno <= hi:
                continue
            if not loops and not _persistent_container(facts, c.node.func.value):
                continue  # ``outs = []; outs.append(y)`` once per call: gone when the caller returns
            for arg in c.node.args:
                if arg is call or (type(arg) is ast.Name and arg.id in bound and c.node.lineno > call.lineno):
                    yield found(c.stmt, module=facts.module, what=text_of(arg))


def _instance_calls(call_method, ctx):
    """Calls of the objects of ``call_method``'s class (``net = CUDAGraphModule(model)`` ... ``net(x)``)."""
    cls = call_method.cls
    if cls is None:
        return
    for module in ctx.project.checked:
        if f"{cls.name}(" not in module.text:
            continue
        for fref in callers.functions_of(module):
            facts = facts_of(ctx.project, fref)
            for c in facts.calls:
                kind = facts.infer(c.node.func)
                if type(kind) is tuple and kind[0] == "inst" and kind[1] is cls:
                    yield fref, c.node


def _outputs_in_globals(region, outputs: set[str]) -> set[str]:
    """``global graph, static_out`` in the capturing function: the outputs the script's other functions read."""
    node = region.scope.node if region.scope is not None else None
    if node is None or type(node) is ast.Module:
        return set()
    declared = {name for n in ast.walk(node) if type(n) is ast.Global for name in n.names}
    return outputs & declared


def _outputs_on_self(region, ctx, around, outputs: set[str]) -> set[str]:
    """The runner's attributes that hold the capture's outputs: ``self.static_out = ...`` in the capturing
    function, or a container filled with them, ``self.outputs[bs] = out`` (one graph per batch size), there
    or in the callers it returns them to."""
    facts = around.facts
    if not facts.self_name:
        return set()
    attrs = {f"{facts.self_name}.{st.attr}" for st in facts.self_stores if around.start <= st.stmt.lineno <= around.end}
    # ``self.static_xy.copy_(xy)`` in the capture, or in the methods of the runner it runs (``self._step()``):
    # a buffer the graph writes
    for reached, (lo, hi), _chain in region.reached:
        if reached.fref.key != facts.fref.key and (reached.cls is not facts.cls or reached.cls is None):
            continue
        for c in reached.calls:
            value = c.node.func.value if c.meth == "copy_" else None
            if lo <= c.node.lineno <= hi and type(value) is ast.Attribute and \
                    type(value.value) is ast.Name and value.value.id == reached.self_name:
                attrs.add(f"{facts.self_name}.{value.attr}")
    for target, stmt in facts.item_stores:  # ``self.outs[n] = self._sample(n)`` in the capture
        base = target.value
        while type(base) is ast.Subscript:
            base = base.value
        if around.start <= stmt.lineno <= around.end and type(base) is ast.Attribute and \
                type(base.value) is ast.Name and base.value.id == facts.self_name:
            attrs.add(f"{facts.self_name}.{base.attr}")
    for name in outputs:
        attrs |= {held for held in near.kept_in(region, ctx, name) if held.startswith(f"{facts.self_name}.")}
    return attrs


def _output_base(node, attrs: set[str], views: set[str]) -> bool:
    """Whether ``node`` is one of the outputs on the runner, or an element or slice of one."""
    while True:
        if text_of(node) in attrs or (type(node) is ast.Name and node.id in views):
            return True
        if type(node) is not ast.Subscript:
            return False
        node = node.value


def _views_of(facts, attrs: set[str]) -> set[str]:
    """Local names bound to an output on the runner or a slice of one: ``logits = self.outputs[bs][:n]``."""
    views: set[str] = set()
    for s in facts.stores:
        value = getattr(s.node, "value", None)
        if type(s.node) is ast.Assign and value is not None and _output_base(value, attrs, views):
            views.add(s.name)
    return views


def _replay_loops(facts) -> list[tuple[int, int]]:
    return [(lp.lineno, lp.end_lineno) for lp in facts.loops
            if any(c.meth == "replay" and lp.lineno <= c.node.lineno <= lp.end_lineno for c in facts.calls)]


def _last_binding_line(sf, name: str, line: int) -> int:
    last = 0
    for s in sf.stores:
        if s.name == name and s.node.lineno < line:
            last = max(last, s.node.lineno)
    return last


@RULES.also("CG407", Region())
def compiled_output_kept(region, ctx):
    """``y = compiled(x)`` kept (in a container, an attribute, or a variable read later) past the
    next call of a CUDA-graph-compiled callable: measured on torch 2.11 (benchmarks/compile_hazards.py),
    the next call of the same function, and of another compiled function, both overwrite it. A function
    that returns only host values (``float(...)``, ``.tolist()``, strings, times) or tensors selected by a
    mask (``x[keep]``: a graph break, computed eagerly) returns nothing that a graph holds."""
    if region.roots and all(_returns_no_graph_tensor(facts_of(ctx.project, root)) for root in region.roots):
        return
    for inv in near.invocations(region, ctx):
        facts, call = inv.facts, inv.call
        stmt = call.stmt
        if _host_inputs_only(facts, call.node):
            continue  # ``my_model(torch.randn(10, 10))``: CPU tensors in, CPU tensors out, no CUDA graph
        kept_directly = _kept_directly(stmt, call.node, inv.loops)
        if kept_directly:
            yield found(stmt, module=facts.module, what=text_of(call.node.func) + "(...)", detail=kept_directly)
            continue
        if type(stmt) is not ast.Assign or stmt.value is not call.node:
            continue
        names = [t.id for t in _flat_targets(stmt.targets) if type(t) is ast.Name]
        names = [n for n in names if not _host_value_returned(region, ctx, stmt, n)]
        if not names:
            continue
        fed_back = [a.id for a in call.node.args if type(a) is ast.Name and a.id in names
                    and not _rebound_in_loop(facts, a.id, stmt, inv.loops)]
        if fed_back and inv.loops and not any(c.meth == "backward" for c in facts.calls):
            # ``x = step(x, u)`` in a loop: the output of one call is the input of the next, which
            # overwrites it (measured: benchmarks/graphed_parts_and_reads.py, output-fed-back)
            yield found(stmt, module=facts.module, what=fed_back[0], detail=" (fed back into the next call of it)")
        others = [i.call.node for other in ctx.regions for i in near.invocations(other, ctx)
                  if i.facts is facts and i.call is not call]
        for name in names:
            yield from _kept(facts, name, stmt, call.node, others, inv.loops)


_HOST_VALUE_CALLS = frozenset({"float", "int", "str", "bool", "len", "round"})
_HOST_QUALS = frozenset({"time.time", "time.perf_counter", "time.monotonic", "time.perf_counter_ns"})


def _returns_no_graph_tensor(facts) -> bool:
    """Every value the function returns is a host value or a mask-selected (eager) tensor."""
    returns = [n for n in ast.walk(facts.fref.node) if type(n) is ast.Return]
    if not returns or any(r.value is None for r in returns):
        return False
    return all(_not_graph_held(facts, part) for r in returns for part in _parts(r.value))


def _host_inputs_only(facts, call) -> bool:
    """Every argument of the call that is a tensor is a CPU tensor (and at least one is)."""
    kinds = [facts.infer(a) for a in [*call.args, *(kw.value for kw in call.keywords)]]
    tensors = [k for k in kinds if is_tensor(k)]
    return bool(tensors) and all(k is CPU for k in tensors)


def _host_value_returned(region, ctx, stmt, name: str) -> bool:
    """``whole, stamp = decode(x)`` where every compiled root returns ``(whole * 100, time.time())``:
    ``stamp`` receives a host value, which no graph holds."""
    target = stmt.targets[0] if len(stmt.targets) == 1 else None
    if type(target) is not ast.Tuple or not region.roots:
        return False
    position = next((i for i, t in enumerate(target.elts) if type(t) is ast.Name and t.id == name), None)
    if position is None:
        return False
    for root in region.roots:
        facts = facts_of(ctx.project, root)
        returns = [n.value for n in ast.walk(root.node) if type(n) is ast.Return]
        if not returns or not all(type(r) is ast.Tuple and len(r.elts) == len(target.elts)
                                  and _not_graph_held(facts, r.elts[position]) for r in returns):
            return False
    return True


def _parts(expr) -> list:
    if type(expr) in (ast.Tuple, ast.List):
        return [p for e in expr.elts for p in _parts(e)]
    if type(expr) is ast.Dict:
        return [p for v in expr.values for p in _parts(v)]
    return [expr]


def _not_graph_held(facts, e, depth: int = 0) -> bool:
    if depth > 6:
        return False
    t = type(e)
    if t in (ast.Constant, ast.JoinedStr):
        return True
    if t is not ast.Name and facts.infer(e) is CPU:  # ``1.0 - hits.float().mean(1).cpu()``: a host tensor
        return True
    if t is ast.Call:
        if type(e.func) is ast.Name and e.func.id in _HOST_VALUE_CALLS:
            return True
        if type(e.func) is ast.Attribute and e.func.attr in ("item", "tolist"):
            return True
        return facts.qual(e.func) in _HOST_QUALS
    if t is ast.BinOp:
        return _not_graph_held(facts, e.left, depth + 1) and _not_graph_held(facts, e.right, depth + 1)
    if t is ast.Subscript:  # ``x[keep]`` with a boolean mask: a data-dependent size, computed eagerly
        return facts.infer(e.slice) is MASK
    if t is ast.ListComp:  # ``[CLASSES[i] for i in ids.tolist()]``: names looked up on the host
        elt = e.elt
        return type(elt) is ast.Subscript and type(elt.value) is ast.Name and elt.value.id not in facts.params \
            and not any(s.name == elt.value.id for s in facts.stores)
    if t is ast.Name:
        if e.id in facts.params:  # the caller's own tensor handed back (``hist.copy_(...); return hist``)
            return depth == 0 and not any(s.name == e.id for s in facts.stores)
        stores = [s for s in facts.stores if s.name == e.id and type(s.node) is ast.Assign]
        if not stores:  # a module-level constant (``FS``)
            return not any(s.name == e.id for s in facts.stores)
        return all(_not_graph_held(facts, s.node.value, depth + 1) for s in stores)
    return False


_VIEW_METHODS = frozenset({"view", "reshape", "squeeze", "unsqueeze", "transpose", "permute", "t", "flatten",
                           "narrow", "expand", "view_as", "detach"})


def _rebound_in_loop(facts, name: str, stmt, loops) -> bool:
    """``beta, resid = step(beta, resid)`` then ``beta, resid = beta.clone(), resid.clone()`` before the loop
    comes round: the next call is given a new tensor, not the output (a view of it, ``beta[0]`` or
    ``beta.view(-1)``, would still be the output)."""
    loop = next(((lo, hi) for lo, hi in loops if lo <= stmt.lineno <= hi), None)
    if loop is None:
        return False
    for s in facts.stores:
        if s.name != name or not stmt.end_lineno < s.node.lineno <= loop[1] or type(s.node) is not ast.Assign:
            continue
        value = _assigned_part(s.node, name)
        if value is not None and not _view_of(value, name):
            return True
    return False


def _assigned_part(assign, name: str):
    """The expression ``assign`` binds to ``name``: the whole value, or its element in a tuple unpacking."""
    for target in assign.targets:
        if type(target) is ast.Name and target.id == name:
            return assign.value
        if type(target) in (ast.Tuple, ast.List):
            position = next((i for i, t in enumerate(target.elts) if type(t) is ast.Name and t.id == name), None)
            if position is None:
                continue
            if type(assign.value) in (ast.Tuple, ast.List) and len(assign.value.elts) == len(target.elts):
                return assign.value.elts[position]
            return assign.value
    return None


def _view_of(expr, name: str) -> bool:
    """``expr`` is ``name`` itself or a view of it (``name[0]``, ``name.T``, ``name.view(-1)``)."""
    while True:
        if type(expr) is ast.Name:
            return expr.id == name
        if type(expr) in (ast.Subscript, ast.Attribute):
            expr = expr.value
        elif type(expr) is ast.Call and type(expr.func) is ast.Attribute and expr.func.attr in _VIEW_METHODS:
            expr = expr.func.value
        else:
            return False


def _kept_directly(stmt, call_node, loops) -> str | None:
    """``outs = [f(x) for _ in range(n)]`` or ``outs.append(f(x))`` in a loop: each output is kept as the
    next call runs."""
    value = getattr(stmt, "value", None)
    if type(value) in (ast.ListComp, ast.SetComp, ast.DictComp):
        kept = value.value if type(value) is ast.DictComp else value.elt
        if _holds(kept, call_node):  # not ``f(x).cpu()`` or ``f(x).clone()``: copies
            return " (a list of the outputs of successive calls)"
    if type(value) is ast.Call and type(value.func) is ast.Attribute and value.func.attr in ("append", "extend", "insert") \
            and any(a is call_node for a in value.args) and loops:
        return " (the loop calls it again)"
    return None


def _looked_up_again(store, containers: set[str]) -> bool:
    """The name is bound again from a container the captured tensor was put in (``self.io[key] = (static,
    out)`` after the capture, then ``static, out = self.io[key]``)."""
    value = getattr(store.node, "value", None)
    while type(value) is ast.Subscript:
        value = value.value
    return value is not None and text_of(value) in containers


def _holds(expr, call_node) -> bool:
    """``expr`` is the call's output itself, a view of it (``out[0]``, ``out.T``) or a tuple holding it."""
    if expr is call_node:
        return True
    if type(expr) in (ast.Tuple, ast.List):
        return any(_holds(e, call_node) for e in expr.elts)
    if type(expr) in (ast.Subscript, ast.Attribute):
        return _holds(expr.value, call_node)
    return False


def _read_before_rebinding(facts, store, loop) -> bool:
    """``prev = out`` (a plain name, not an unpacking) whose name the loop reads above the store: on the
    next iteration it is read before it is bound again."""
    targets = getattr(store.node, "targets", [])
    if len(targets) != 1 or type(targets[0]) is not ast.Name:
        return False
    return any(n.id == store.name and loop[0] <= n.lineno < store.node.lineno for n in facts.loads)


def _kept(facts, name, stmt, call_node, others, loops):
    """Where ``name`` (the result of ``call_node``) is kept past another call of the function."""
    bound = stmt.end_lineno
    rebinds = sorted(s.node.lineno for s in facts.stores if s.name == name and s.node.lineno > bound)
    until = rebinds[0] if rebinds else 1 << 30
    loop = next(((lo, hi) for lo, hi in loops if lo <= call_node.lineno <= hi), None)
    for kept_name, where in facts.escapes:
        line = where.lineno
        if kept_name == name and bound < line < until and loop is not None and loop[0] <= line <= loop[1]:
            yield found(where, module=facts.module, what=name, detail=" (the loop calls it again)")
            return
        container = _outliving_container(facts, where)
        if kept_name == name and bound < line < until and container:
            yield found(where, module=facts.module, what=name,
                        detail=f" (in `{container}`, which outlives this call)")
            return
    for s in facts.stores:  # ``prev_logits = logits`` in the loop: read again after the next call
        value = getattr(s.node, "value", None)
        if loop is not None and type(value) is ast.Name and value.id == name and bound < s.node.lineno < until \
                and loop[0] <= s.node.lineno <= loop[1] and _read_before_rebinding(facts, s, loop):
            yield found(s.node, module=facts.module, what=name, detail=f" (as `{s.name}`, read on the next iteration)")
            return
    later_calls = [n for n in others if bound < n.lineno < until]
    if any(c.meth == "backward" and c.node.lineno > bound for c in facts.calls):
        # A training step: while its backward is pending, cudagraph trees keep the forward's outputs
        # (measured on torch 2.11: an encoder's output passed to a compiled scorer twice and read, no
        # error; the same without a backward raises; benchmarks/heldout3_disputes.py).
        later_calls = []
    if later_calls:
        first_call = min(later_calls, key=lambda n: (n.lineno, n.col_offset))
        done = (first_call.end_lineno, first_call.end_col_offset)  # its arguments are read before it runs
        for load in facts.loads:  # reported where it is read: that read raises
            if load.id == name and done < (load.lineno, load.col_offset) and load.lineno < until:
                yield found(load, module=facts.module, what=name,
                            detail=f" (bound at L{stmt.lineno}; read here, after the call at L{first_call.lineno})")
                return


def _outliving_container(facts, stmt) -> str | None:
    """``self.history`` for ``self.history.append(y)`` (or a global list): a container that keeps what is
    appended after the function returns, so past the next call of whatever produced it."""
    call = getattr(stmt, "value", None)
    if type(call) is not ast.Call or type(call.func) is not ast.Attribute or call.func.attr not in ("append", "extend", "insert"):
        return None
    whole = holder = call.func.value
    # ``UI["frames"].append(img)``, ``self.history.setdefault(key, []).append(y)``: a list kept in a dict that outlives it
    while type(holder) is ast.Subscript or (type(holder) is ast.Call and type(holder.func) is ast.Attribute
                                             and holder.func.attr == "setdefault"):
        holder = holder.value if type(holder) is ast.Subscript else holder.func.value
    if type(holder) is ast.Attribute and type(holder.value) is ast.Name and holder.value.id == facts.self_name:
        return text_of(whole)
    if type(holder) is ast.Name and type(facts.fref.node) is not ast.Module \
            and not any(s.name == holder.id for s in facts.stores):
        return text_of(whole)  # a module-level list or one passed in: it outlives the function
    return None


def _flat_targets(targets):
    out = []
    for t in targets:
        if type(t) in (ast.Tuple, ast.List):
            out.extend(_flat_targets(t.elts))
        else:
            out.append(t)
    return out


_CPU_RNG_STATE = frozenset(
    "torch.get_rng_state torch.set_rng_state torch.random.get_rng_state torch.random.set_rng_state".split()
)
# Reading the CUDA generator's state and putting a saved state back (CG413); every other name of
# _RNG_STATE that is no CPU state and no host seed sets a seed (CG408).
_CUDA_RNG_SAVE_RESTORE = frozenset(
    """torch.cuda.get_rng_state torch.cuda.set_rng_state torch.cuda.get_rng_state_all
    torch.cuda.set_rng_state_all torch.random.fork_rng torch.cuda.random.get_rng_state
    torch.cuda.random.set_rng_state""".split()
)
_RNG_SEEDS = _RNG_STATE - _CUDA_RNG_SAVE_RESTORE - _CPU_RNG_STATE - frozenset(_HOST_SEEDS)
_RNG_SINCE_210 = (
    "Since torch 2.10 (pytorch/pytorch#162505) the CUDA generator allows, during capture, reading its "
    "state and setting a state or seed equal to the one it has: only the offset changes, which is "
    "what activation checkpointing does when it rewinds the generator. Measured on one H200, torch "
    "2.11 (benchmarks/RESULTS.md): `torch.cuda.get_rng_state()` followed by `set_rng_state()` of that "
    "state captured, and replays still drew new numbers; re-setting the seed the generator already "
    "had captured; `graphsafe_get_state()`/`graphsafe_set_state()` captured."
)


@RULES.rule(
    Rule(
        code="CG408",
        name="rng-state-in-region",
        category="rng",
        message="`{what}` changes the CUDA RNG state during capture: a new seed or `clone_state()` fails capture",
        compile_message="`{what}` seeds or clones the RNG state inside a compiled region: graph break here",
        fix="Seed before capture, and clone generator states before capture. Inside the capture, switch "
        "states with `Generator.graphsafe_get_state()` / `graphsafe_set_state()`.",
        what="Checks for `torch.manual_seed`, `torch.seed`, `torch.cuda.manual_seed(_all)`, "
        "`torch.cuda.seed(_all)` and `Generator.manual_seed/seed/clone_state` inside a captured region. "
        "Reading or restoring the CUDA state (`torch.cuda.get_rng_state`, `set_rng_state`, "
        "`Generator.get_state/set_state`) is CG413. The CPU generator's `torch.get_rng_state()`/"
        "`set_rng_state()` are not reported: captured CUDA work does not use that generator "
        "(activation checkpointing saves it by design).",
        why="While a graph is captured, the CUDA generator hands out offsets that replays advance. "
        + _RNG_SINCE_210
        + " A different seed is refused: `CUDAGeneratorImpl::set_current_seed can be called during "
        "stream capture only if new seed is the same as the original seed.` (measured in the same run). "
        "Cloning the state is refused too: `clone_state()` runs `CUDAGeneratorImpl::clone_impl`, "
        "which asserts that no capture is underway; measured: `Cannot call CUDAGeneratorImpl::clone_impl "
        "during CUDA graph capture. If you need this call to be captured, please file an issue.` "
        "Before torch 2.10 every seed call and every read of the state raised. Even an accepted seed "
        "call is host code that runs once, at capture: it does not reseed replays.",
        example=code("""
            import torch

            x = torch.zeros(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                torch.cuda.manual_seed(0)
                y = x + torch.rand(64, device="cuda")
        """),
        use_instead=code("""
            import torch

            x = torch.zeros(64, device="cuda")
            torch.cuda.manual_seed(0)  # before capture
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x + torch.rand(64, device="cuda")
            g.replay()
        """),
    ),
    Calls(quals=tuple(sorted(_RNG_SEEDS)), methods=("manual_seed", "seed", "clone_state")),
)
def rng_state_in_region(c, f):
    yield from _rng_calls(c, _RNG_SEEDS)


def _rng_calls(c, quals):
    """A torch function of ``quals``, or the listened-to method of a CUDA generator."""
    if c.qual is not None:
        if c.qual in quals:
            yield found(c.node, c.stmt, what=c.qual)
    elif type(c.recv) is tuple and c.recv[0] == "generator":
        yield found(c.node, c.stmt, what=f"{text_of(c.node.func.value)}.{c.meth}()")


@RULES.rule(
    Rule(
        code="CG413",
        name="rng-state-save-restore",
        category="rng",
        message="`{what}` reads or restores the CUDA RNG state during capture: allowed since torch 2.10 "
        "while the seed stays the same; older releases refuse it",
        compile_message="`{what}` reads or restores the RNG state inside a compiled region: graph break here",
        fix="On torch 2.10 and later nothing is needed when the state comes from the same generator "
        "(same seed). For older releases, or to switch between generator states, read and restore "
        "outside the capture, or use `Generator.graphsafe_get_state()` / `graphsafe_set_state()` inside it.",
        manual="info",
        what="Checks for `torch.cuda.get_rng_state(_all)`, `torch.cuda.set_rng_state(_all)`, "
        "`torch.random.fork_rng` and `Generator.get_state/set_state` inside a captured region.",
        why=_RNG_SINCE_210
        + " Restoring a state saved under another seed is still refused (`set_current_seed can be "
        "called during stream capture only if new seed is the same as the original seed`). Before "
        "torch 2.10 both calls raised (`Cannot call CUDAGeneratorImpl::current_seed during CUDA graph "
        "capture`, `Please ensure to utilize the CUDAGeneratorImpl::set_state_index method during "
        "capturing`): reported as info, for code that must run on older releases. Under "
        "`torch.compile`, Dynamo does not trace these functions (`trace_rules.py` lists "
        "`torch.cuda.get_rng_state` and `set_rng_state` as skipped), so the frame breaks there.",
        gpu_skip="measured on an H200 with torch 2.11 (2026-11-30, rng-get-state-in-capture): reading the "
        "state and setting it back captures and replays; the rule is advice (info) for releases before 2.10",
        example=code("""
            import torch

            x = torch.zeros(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                state = torch.cuda.get_rng_state()
                torch.cuda.set_rng_state(state)
                y = x + torch.rand(64, device="cuda")
        """),
        use_instead=code("""
            import torch

            x = torch.zeros(64, device="cuda")
            state = torch.cuda.get_rng_state()  # saved before capture
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x + torch.rand(64, device="cuda")
            g.replay()
        """),
    ),
    Calls(quals=tuple(sorted(_CUDA_RNG_SAVE_RESTORE)), methods=("get_state", "set_state")),
)
def rng_state_save_restore(c, f):
    yield from _rng_calls(c, _CUDA_RNG_SAVE_RESTORE)


@RULES.rule(
    Rule(
        code="CG409",
        name="unregistered-generator",
        category="rng",
        message="generator `{what}` is used during capture but not registered with the graph; capture fails here",
        fix="Register it before capture: `g.register_generator_state({what})` (or use the default generator).",
        compile=None,
        what="Checks for random ops with an explicit `generator=` inside a manual capture when the file "
        "does not register that generator (`register_generator_state`) with a graph.",
        why="Only registered generators are graph-safe: the graph must know to advance their offsets on "
        "replay. The default CUDA generator is registered automatically; a custom `torch.Generator` "
        "is not, and using it during capture raises \"Attempt to increase offset for a CUDA generator "
        "not in capture mode.\"",
        example=code("""
            import torch

            gen = torch.Generator(device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                noise = torch.rand(64, device="cuda", generator=gen)
        """),
        use_instead=code("""
            import torch

            gen = torch.Generator(device="cuda")
            g = torch.cuda.CUDAGraph()
            g.register_generator_state(gen)
            with torch.cuda.graph(g):
                noise = torch.rand(64, device="cuda", generator=gen)
            g.replay()
        """),
    ),
    Calls(every=True),
)
def unregistered_generator(c, f):
    if c.qual is None and c.meth is None:
        return
    gen = c.kwarg("generator")
    if gen is not None and not (type(gen) is ast.Constant and gen.value is None):
        registered = _registered_generators(f)
        if "*" in registered:
            return
        if type(gen) is ast.Name and gen.id in f.params and not any(s.name == gen.id for s in f.stores):
            passed = _generators_passed(f, gen.id)  # ``def rrc_theta(batch, gen)``: what its callers pass
            if any(name is not None and name not in registered for name in passed):
                yield found(gen, c.stmt, what=text_of(gen))
        elif _generator_name(f, gen) not in registered:
            yield found(gen, c.stmt, what=text_of(gen))  # at the argument: the call may span lines


def _generators_passed(facts, param: str) -> list:
    """The last names of the generators the file's callers pass for ``param`` (None for one the checker
    cannot name)."""
    fref = facts.fref
    out = []
    for caller, call in callers.call_sites(facts.project, fref.name, fref):
        arg = callers.argument_for(call, fref.positional_params, param)
        if arg is not None:
            out.append(_generator_name(facts_of(facts.project, caller), arg))
    return out


def _registered_generators(f) -> set:
    """The last names of the generators the file registers (``g.register_generator_state(self.gen)``
    -> ``gen``); ``{"*"}`` when one is registered through an expression the checker cannot name."""
    module = f.module
    if "register_generator_state" not in module.text:
        return set()
    out = set()
    for fref in callers.functions_of(module):
        if type(fref.node) is not ast.Module and "register_generator_state" not in callers.source_of(fref):
            continue
        facts = facts_of(f.project, fref)
        for c in facts.calls:
            if c.meth == "register_generator_state" and c.node.args and \
                    (type(fref.node) is not ast.Module or not _inside_function(module, c.node)):
                out |= _names_registered(facts, c.node.args[0])
    return out


def _inside_function(module, node) -> bool:
    return any(fn.lineno <= node.lineno <= fn.end_lineno for fn in ast.walk(module.tree)
               if type(fn) in (ast.FunctionDef, ast.AsyncFunctionDef))


def _names_registered(facts, gen) -> set:
    """``self.gen`` -> {"gen"}; ``for gen in generators: g.register_generator_state(gen)`` -> the names
    in what is iterated: a tuple written out, or what the callers pass for the parameter (nothing, for
    one they leave at its default)."""
    if type(gen) is ast.Name:
        loops = facts.loops_binding(gen.id)
        if len(loops) == 1 and loops[0][1] is not None and type(loops[0][1]) is ast.Name:
            iterated = loops[0][0]
            if type(iterated) in (ast.Tuple, ast.List):
                return {(dotted(e) or ["*"])[-1] for e in iterated.elts}
            if type(iterated) is ast.Name and iterated.id in facts.params \
                    and not any(s.name == iterated.id for s in facts.stores):
                fref = facts.fref
                sites = list(callers.calls_of(facts.project, fref))
                if not sites:
                    return {"*"}
                out = set()
                for _caller, call in sites:
                    passed = callers.argument_for(call, fref.positional_params, iterated.id)
                    if passed is None:
                        continue  # the default: nothing registered
                    if type(passed) not in (ast.Tuple, ast.List):
                        return {"*"}
                    out |= {(dotted(e) or ["*"])[-1] for e in passed.elts}
                return out
    parts = dotted(gen)
    return {parts[-1] if parts else "*"}


def _generator_name(facts, gen) -> str | None:
    """The last name of a generator expression, through a local alias (``gen = self.jitter_gen``)."""
    if type(gen) is ast.Name:
        bound = [s for s in facts.stores if s.name == gen.id and not s.loop_target and getattr(s.node, "value", None) is not None]
        if len(bound) == 1 and dotted(bound[0].node.value):
            gen = bound[0].node.value
    parts = dotted(gen)
    return parts[-1] if parts else None


_CHECKPOINT = ("torch.utils.checkpoint.checkpoint", "torch.utils.checkpoint.checkpoint_sequential")


@RULES.rule(
    Rule(
        code="CG410",
        name="checkpoint-preserves-rng",
        trace=None,
        trace_blind="advice for older torch releases: the example captures and replays correctly on torch 2.11 (see gpu_skip)",
        category="rng",
        message="activation checkpointing with `preserve_rng_state=True` (the default) stashes and restores RNG state during capture",
        fix="Pass `preserve_rng_state=False` inside captured code (and keep random ops out of the checkpointed function, or make them graph-safe).",
        manual="info",
        compile=None,
        what="Checks for `torch.utils.checkpoint.checkpoint` calls inside a manual capture without `preserve_rng_state=False`.",
        why="To recompute the same dropout masks, checkpointing saves the CPU and CUDA RNG state in "
        "forward and restores it in backward: host-side state reads and writes that run once, at "
        "capture. Older releases refused the CUDA RNG read during capture (pytorch/pytorch#83148, "
        "\"Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture\"), which is why the "
        "usual checklist asks for `preserve_rng_state=False`. Measured on torch 2.11 (H200, "
        "2026-11-29): the example below captures and replays without an error, so this is advice, "
        "reported as info: keep it where the checkpointed code draws random numbers or older torch "
        "versions must work.",
        gpu_skip="measured on an H200 with torch 2.11 (2026-11-29): the example captures and replays "
        "without an error; the rule is advice (info) for older releases",
        example=code("""
            import torch
            from torch.utils.checkpoint import checkpoint

            lin = torch.nn.Linear(16, 16).cuda()
            x = torch.randn(4, 16, device="cuda", requires_grad=True)
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    checkpoint(lin, x, use_reentrant=False, preserve_rng_state=False).sum().backward()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = checkpoint(lin, x, use_reentrant=False)
                y.sum().backward()
        """),
        use_instead=code("""
            import torch
            from torch.utils.checkpoint import checkpoint

            lin = torch.nn.Linear(16, 16).cuda()
            x = torch.randn(4, 16, device="cuda", requires_grad=True)
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    checkpoint(lin, x, use_reentrant=False, preserve_rng_state=False).sum().backward()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = checkpoint(lin, x, use_reentrant=False, preserve_rng_state=False)
                y.sum().backward()
            g.replay()
        """),
    ),
    Calls(quals=_CHECKPOINT),
)
def checkpoint_preserves_rng(c, f):
    if not is_false(c.kwarg("preserve_rng_state")):
        yield found(c.node, c.stmt)


# -- helpers -----------------------------------------------------------------------------------------
def _reads_self_attr(value, self_name, attr) -> bool:
    """``self.attr`` or ``getattr(self, "attr", 0)`` is read in ``value``."""
    for node in ast.walk(value):
        if type(node) is ast.Attribute and node.attr == attr and type(node.value) is ast.Name and node.value.id == self_name:
            return True
        if type(node) is ast.Call and type(node.func) is ast.Name and node.func.id == "getattr" and len(node.args) >= 2 \
                and type(node.args[0]) is ast.Name and node.args[0].id == self_name \
                and type(node.args[1]) is ast.Constant and node.args[1].value == attr:
            return True
    return False


def _is_number(node) -> bool:
    return type(node) is ast.Constant and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)


def _op(op) -> str:
    return {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}.get(type(op), "?")
