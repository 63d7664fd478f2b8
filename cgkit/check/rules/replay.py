"""CG4xx: silent replay hazards. Capture succeeds, but replays do something else than eager code."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from cgkit.check.facts import (
    RANDOM_FACTORIES,
    attr_kind,
    class_attrs,
    facts_of,
    is_tensor,
    module_facts,
    mutable_globals,
)
from cgkit.check.model import Rule
from cgkit.check.rules._base import Body, Calls, Each, Family, Region, code, found, is_false, text_of

_HOST_NOTE = (
    "A CUDA graph records GPU work only. Python code inside the region runs once, while the "
    "graph is being captured; `replay()` launches the recorded kernels and runs none of it."
)

RULES = Family()

_LOG_METHODS = frozenset("debug info warning warn error exception critical log".split())
_LOGGER_NAMES = frozenset("logger log LOGGER LOG _logger _log".split())
_HOST_CALLS = {
    "builtins.print": "`print()`",
    "builtins.open": "`open()`",
    "builtins.input": "`input()`",
    "torch.save": "`torch.save()`",
    "torch.load": "`torch.load()`",
    "time.time": "`time.time()`",
    "time.time_ns": "`time.time_ns()`",
    "time.perf_counter": "`time.perf_counter()`",
    "time.perf_counter_ns": "`time.perf_counter_ns()`",
    "time.monotonic": "`time.monotonic()`",
    "time.monotonic_ns": "`time.monotonic_ns()`",
    "time.process_time": "`time.process_time()`",
    "time.sleep": "`time.sleep()`",
    "datetime.datetime.now": "`datetime.now()`",
    "json.dump": "`json.dump()`",
    "json.load": "`json.load()`",
    "pickle.dump": "`pickle.dump()`",
    "pickle.load": "`pickle.load()`",
    "numpy.save": "`numpy.save()`",
    "numpy.load": "`numpy.load()`",
    "sys.stdout.write": "`sys.stdout.write()`",
    "sys.stderr.write": "`sys.stderr.write()`",
    "wandb.log": "`wandb.log()`",
}
_LOGGING_CALLS = tuple(f"logging.{m}" for m in sorted(_LOG_METHODS))
_WRITER_METHODS = frozenset("add_scalar add_scalars add_histogram add_image add_text".split())


@RULES.rule(
    Rule(
        code="CG401",
        name="host-side-effect",
        trace=None,
        trace_blind="host code with no tensor in it (logging, timing, print of Python values) runs no operator: a run has nothing to record; cgkit check reports it",
        category="host-code",
        message="{what} runs on the host: once at capture, never on replay",
        compile_message="{what} runs on the host inside a compiled region (graph break or eager code)",
        fix="Move it out of the region: log, time or save around `replay()`, from the output tensors.",
        manual="warning",
        compile="info",
        what="Checks for host side effects in a captured region: `print`, `logging`, file I/O, "
        "`torch.save`/`torch.load`, clocks (`time.time()`, `perf_counter()`) and `sleep`.",
        why=_HOST_NOTE + " A log line in the region prints once; a timer measures the capture, "
        "not the step; a file is written once. Under `torch.compile` such calls cause graph breaks "
        "or run eagerly around the graph.",
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
        gpu_skip="host-only behaviour: nothing fails and the GPU result is the same; the call just does not run on replay",
    ),
    Calls(quals=(*_HOST_CALLS, *_LOGGING_CALLS), methods=(*_LOG_METHODS, "write", *_WRITER_METHODS)),
    yields_to=("CG106",),  # print(tensor): CG106 says more than "host code"
)
def host_side_effect(c, f):
    node, q = c.node, c.qual
    if q is not None:
        yield found(node, c.stmt, what=_HOST_CALLS.get(q) or f"`{q}()`")
        return
    m, recv, value = c.meth, c.recv, node.func.value
    if m in _LOG_METHODS:
        if (type(recv) is tuple and recv[0] == "logger") or (type(value) is ast.Name and value.id in _LOGGER_NAMES):
            yield found(node, c.stmt, what=f"`{text_of(value)}.{m}()`")
    elif m == "write":
        if type(recv) is tuple and recv[0] == "file":
            yield found(node, c.stmt, what=f"`{text_of(value)}.write()`")
    elif not is_tensor(recv):
        yield found(node, c.stmt, what=f"`{text_of(value)}.{m}()`")


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
        manual="warning",
        compile=None,
        what="Checks for Python state updated inside a captured region: counters (`self.step += 1`) "
        "and containers that outlive the call (`self.history.append(...)`).",
        why=_HOST_NOTE + " A step counter stays at the value it had after capture, and a list gets "
        "one entry instead of one per step. Code that later reads that state (a schedule, a "
        "logging condition) silently sees the wrong value.",
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
    if _persistent_container(f, value):
        yield found(c.node, c.stmt, what=f"`{text_of(value)}.{c.meth}()`")


def _persistent_container(f, value) -> bool:
    """``self.history`` or a module-level list: state that outlives one call of the function."""
    t = type(value)
    if t is ast.Attribute:
        base = value.value
        if type(base) is ast.Name and base.id == f.self_name and f.cls is not None:
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


@RULES.also("CG402", Each("self_stores"))
def host_attribute_update(item, f):
    """``self.count += 1`` and ``self.total = self.total + 1`` on a Python number."""
    attr, stmt, value = item
    kind = attr_kind(f.cls, attr, f.project) if f.cls is not None else None
    if type(stmt) is ast.AugAssign:
        if type(stmt.value) is ast.Constant and isinstance(stmt.value.value, (int, float)) and not is_tensor(kind):
            yield found(stmt, stmt, what=f"`self.{attr} {_op(stmt.op)}= ...`")
    elif value is not None and _reads_self_attr(value, f.self_name, attr):
        if not (is_tensor(kind) or is_tensor(f.infer(value))) and type(value) is ast.BinOp and _is_number(value.right):
            yield found(stmt, stmt, what=f"`self.{attr} = self.{attr} ...`")


@RULES.also("CG402", Body())
def global_update(f):
    if type(f.fref.node) is not ast.Module and f.global_names:
        for store in f.stores:
            if store.aug and store.name in f.global_names:
                yield found(store.node, store.node, what=f"global `{store.name}` update")


@RULES.also("CG402", Region())
def host_update_in_capture(region, ctx):
    """Host containers and counters that live outside the region, updated inside it."""
    around = _around(region, ctx)
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
                _kind_before(sf, s.name, around.rs)):
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
        what="Checks for Python `random`, `numpy.random` and CPU `torch.rand*` calls inside a captured region.",
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


_SCALAR_ANNOTATIONS = ("int", "float", "bool")


@RULES.rule(
    Rule(
        code="CG404",
        name="python-scalar",
        category="python-scalar",
        message="Python value `{what}` is read at capture{detail}: its value is baked into the graph and later changes are ignored",
        compile_message="Python value `{what}` changes between calls{detail}: each new value recompiles or adds an uncaptured partition",
        fix="Hold the value in a GPU tensor created before capture and update it with `.fill_(value)` before each `replay()`.",
        compile="info",
        what="Checks for Python numbers read inside a captured region that change between steps: "
        "names rebound after capture, module globals updated elsewhere, `self` attributes set outside "
        "`__init__`, and scalar parameters of the captured function.",
        why="A graph stores the kernels and their arguments as they were at capture. A learning rate, "
        "temperature or step count read from Python is one of those arguments: replays keep using "
        "the captured value, with no error. Under `torch.compile` a changing Python scalar causes a "
        "recompile, then becomes a dynamic input that is not captured.",
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
    Body(),
)
def python_scalar(f):
    """Python numbers the function reads that change elsewhere: an attribute set outside, a module
    global rebound, a number-typed parameter of the captured function."""
    project = f.project
    if f.cls is not None and f.self_loads:
        updates = {}
        for cls in f.cls.mro(project):
            for attr, line in class_attrs(cls, project).scalar_updates.items():
                updates.setdefault(attr, (line, cls))
        if updates:
            seen = set()
            for node in f.self_loads:
                attr = node.attr
                if attr in updates and attr not in seen:
                    seen.add(attr)
                    line, cls = updates[attr]
                    yield found(node, what=f"self.{attr}", detail=f" (it is set at L{line} in {cls.name})")
    if type(f.fref.node) is not ast.Module:
        mutable = mutable_globals(f.module, project)
        if mutable:
            local = {s.name for s in f.stores} | set(f.params)
            seen = set()
            for node in f.loads:
                name = node.id
                if name in mutable and name not in local and name not in seen and name not in f.global_names:
                    seen.add(name)
                    yield found(node, what=name, detail=f" (it is rebound at L{mutable[name]})")
        for name, arg in f.param_nodes.items():
            ann = arg.annotation
            if type(ann) is ast.Name and ann.id in _SCALAR_ANNOTATIONS:
                yield found(arg, root_only=True, what=name, detail=" (a Python-number parameter of the captured function)")


@RULES.also("CG404", Region())
def scalar_rebound_after_capture(region, ctx):
    around = _around(region, ctx)
    if around is None:
        return
    reported = set()
    for s in around.facts.stores:
        if s.name in reported or not around.rebound_later(s):
            continue
        if _kind_before(around.facts, s.name, around.rs) is None and _is_scalar_value(around.facts, s):
            reported.add(s.name)
            yield found(around.reads[s.name], what=s.name, detail=f" (it is rebound at L{s.node.lineno})")


@RULES.rule(
    Rule(
        code="CG405",
        name="rebound-static-input",
        category="static-address",
        message="`{what}` is an input of the graph captured at L{line} but is {how} here: replays keep reading the old tensor",
        fix="Keep the captured tensor alive and write new data into it: `{what}.copy_(new_data)`.",
        compile=None,
        what="Checks for inputs of a manual capture that are rebound (or deleted) after capture "
        "instead of being updated in place.",
        why="A graph reads its inputs from the addresses they had at capture. Binding the Python name "
        "to a new tensor does not move the data there: the graph keeps reading the old tensor, and "
        "if that tensor is freed its memory may be reused by something else.",
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
    around = _around(region, ctx)
    if around is None:
        return
    sf, rs = around.facts, around.rs
    reported = set()
    for s in sf.stores:
        if s.name in reported or not around.rebound_later(s) or not is_tensor(_kind_before(sf, s.name, rs)):
            continue
        if s.aug:
            continue  # x += y on a tensor updates it in place
        reported.add(s.name)
        yield found(s.node, what=s.name, line=region.line, how="rebound")
    for name, stmt in sf.dels:
        if name in around.reads and around.later(stmt.lineno) and is_tensor(_kind_before(sf, name, rs)) \
                and name not in reported:
            reported.add(name)
            yield found(stmt, what=name, line=region.line, how="deleted")


@RULES.rule(
    Rule(
        code="CG406",
        name="state-rebound-in-region",
        category="static-address",
        message="`self.{what}` is replaced by a new tensor inside the region: replays read the original and the update is lost",
        fix="Update the buffer in place: `self.{what}.copy_(...)`, `.mul_()`, `.add_()`.",
        compile=None,
        what="Checks for module state (`self.x = f(self.x)`) rebound to a new tensor inside a captured region.",
        why="Inside capture, the new tensor is allocated from the graph's memory pool and the attribute "
        "is pointed at it once. Every replay recomputes from the tensor the graph read at capture "
        "(the old buffer), so running statistics or caches never accumulate.",
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
    attr, stmt, value = item
    if type(stmt) is ast.AugAssign or value is None or not _reads_self_attr(value, f.self_name, attr):
        return
    kind = attr_kind(f.cls, attr, f.project) if f.cls is not None else None
    if is_tensor(kind) or is_tensor(f.infer(value)):
        yield found(stmt, stmt, what=attr)


@RULES.rule(
    Rule(
        code="CG407",
        name="output-kept-without-clone",
        trace=None,
        trace_blind="keeping a graph output past the next replay happens after the region, in Python: a run has nothing to record; cgkit check reports it",
        category="static-address",
        message="graph output `{what}` is kept here without `.clone()`: the next replay overwrites it",
        fix="Store a copy: `{what}.clone()` (or copy the values you need to the host after the replay).",
        compile=None,
        what="Checks for outputs of a manual capture that are stored across replays (appended, put "
        "in a container or attribute) without being cloned.",
        why="A graph writes its outputs to the same memory on every replay. Keeping a reference to "
        "an output and replaying again overwrites the kept value: a list of per-step results ends up "
        "holding the last step's values many times.",
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
    around = _around(region, ctx)
    if around is None:
        return
    for name, stmt in around.facts.escapes:
        if name in around.stores and around.later(stmt.lineno) and not (around.rs <= stmt.lineno <= around.re):
            yield found(stmt, what=name)


@RULES.rule(
    Rule(
        code="CG408",
        name="rng-state-in-region",
        category="rng",
        message="`{what}` reads or reseeds the RNG state during capture; capture fails here",
        compile_message="`{what}` reads or reseeds the RNG state inside a compiled region: graph break here",
        fix="Seed before capture. To save and restore generator state around graphs use "
        "`Generator.graphsafe_get_state()` / `graphsafe_set_state()`.",
        what="Checks for `torch.manual_seed`, `torch.cuda.manual_seed(_all)`, `get_rng_state`, "
        "`set_rng_state` and `Generator.manual_seed/get_state/set_state` inside a captured region.",
        why="While a graph is captured, the CUDA generator hands out offsets that replays advance; "
        "seeding or reading its state at that moment is refused. Even a CPU seed call inside the "
        "region runs only once, so replays do not reseed.",
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
    Calls(quals=tuple(_RNG_STATE), methods=("manual_seed", "get_state", "set_state", "seed")),
)
def rng_state_in_region(c, f):
    if c.qual is not None:
        if c.qual not in _HOST_SEEDS:
            yield found(c.node, c.stmt, what=c.qual)
    elif type(c.recv) is tuple and c.recv[0] == "generator":
        yield found(c.node, c.stmt, what=f"{text_of(c.node.func.value)}.{c.meth}()")


@RULES.rule(
    Rule(
        code="CG409",
        name="unregistered-generator",
        category="rng",
        message="generator `{what}` is used during capture but not registered with the graph; capture fails here",
        fix="Register it before capture: `g.register_generator_state({what})` (or use the default generator).",
        compile=None,
        what="Checks for random ops with an explicit `generator=` inside a manual capture when the file "
        "never calls `register_generator_state`.",
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
        if "register_generator_state" not in f.module.text:
            yield found(c.node, c.stmt, what=text_of(gen))


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
    for node in ast.walk(value):
        if type(node) is ast.Attribute and node.attr == attr and type(node.value) is ast.Name and node.value.id == self_name:
            return True
    return False


def _is_number(node) -> bool:
    return type(node) is ast.Constant and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)


def _op(op) -> str:
    return {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}.get(type(op), "?")


@dataclass
class _Around:
    """What the region rules read of the code around a manual capture (computed once per region)."""

    facts: object  # the facts of the function that holds the capture
    start: int  # the capture's span
    end: int
    rs: int  # the capture statement's lines
    re: int
    loops: list  # (first, last) lines of the loops around it
    stores: dict  # names stored inside the span -> first store
    reads: dict  # names read inside the span before any store there -> first read

    def later(self, line: int) -> bool:
        """Runs after the capture: below it, or anywhere in a loop around it."""
        return line > self.re or any(lo <= line <= hi for lo, hi in self.loops)

    def rebound_later(self, store) -> bool:
        line = store.node.lineno
        return store.name in self.reads and not (self.rs <= line <= self.re) and self.later(line)


def _around(region, ctx) -> _Around | None:
    if region.span is None or region.scope is None:
        return None
    return ctx.memo(("around", id(region)), lambda: _compute_around(region, ctx))


def _compute_around(region, ctx) -> _Around:
    sf = facts_of(ctx.project, region.scope)
    start, end = region.span
    loops = [(a.lineno, a.end_lineno) for a in region.ancestors if type(a) in (ast.For, ast.While, ast.AsyncFor)]
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
    return _Around(sf, start, end, region.stmt.lineno, region.stmt.end_lineno, loops, stores, reads)


def _kind_before(sf, name: str, line: int):
    kind = None
    for s in sf.stores:
        if s.name == name and s.node.lineno < line:
            kind = s.kind
    return kind


def _is_scalar_value(sf, store) -> bool:
    node = store.node
    value = getattr(node, "value", None)
    if store.loop_target:
        it = getattr(node, "iter", None)
        return type(it) is ast.Call and type(it.func) is ast.Name and it.func.id in ("range", "enumerate")
    if value is None:
        return False
    if store.aug:
        return _is_number(value) or type(value) is ast.Name or type(value) is ast.BinOp
    for sub in ast.walk(value):
        if type(sub) is ast.Call:
            return False
    return True
