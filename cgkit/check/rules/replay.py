"""CG4xx: silent replay hazards. Capture succeeds, but replays do something else than eager code."""

from __future__ import annotations

import ast

from cgkit.check.facts import RANDOM_FACTORIES, is_tensor
from cgkit.check.model import Rule
from cgkit.check.rules._base import code, h, is_false, rh, text_of

_HOST_NOTE = (
    "A CUDA graph records GPU work only. Python code inside the region runs once, while the "
    "graph is being captured; `replay()` launches the recorded kernels and runs none of it."
)

RULES = [
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
]

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
_WRITER_METHODS = frozenset("add_scalar add_scalars add_histogram add_image add_text".split())
_MUTATORS = frozenset("append extend insert add update setdefault appendleft put".split())
_RNG_STATE = frozenset(
    """torch.manual_seed torch.seed torch.get_rng_state torch.set_rng_state torch.cuda.manual_seed
    torch.cuda.manual_seed_all torch.cuda.seed torch.cuda.seed_all torch.cuda.get_rng_state
    torch.cuda.set_rng_state torch.cuda.get_rng_state_all torch.cuda.set_rng_state_all
    torch.random.manual_seed torch.random.seed torch.random.get_rng_state torch.random.set_rng_state
    torch.random.fork_rng torch.cuda.random.manual_seed torch.cuda.random.get_rng_state
    torch.cuda.random.set_rng_state numpy.random.seed random.seed""".split()
)
_CHECKPOINT = ("torch.utils.checkpoint.checkpoint", "torch.utils.checkpoint.checkpoint_sequential")
_SCALAR_ANNOTATIONS = ("int", "float", "bool")


def scan(f):
    yield from _scan_calls(f)
    yield from _scan_state(f)
    yield from _scan_scalars(f)


def _scan_calls(f):
    register_seen = None
    for c in f.calls:
        q = c.qual
        node = c.node
        if q is not None:
            if q in _HOST_CALLS:
                if q == "builtins.print" and any(is_tensor(f.infer(a)) for a in node.args):
                    continue  # CG106 reports it
                yield h("CG401", node, c.stmt, what=_HOST_CALLS[q])
            elif q.startswith("logging.") and q.count(".") == 1 and q[8:] in _LOG_METHODS:
                yield h("CG401", node, c.stmt, what=f"`{q}()`")
            elif q in _RNG_STATE:
                if q in ("numpy.random.seed", "random.seed"):
                    yield h("CG403", node, c.stmt, what=q)
                else:
                    yield h("CG408", node, c.stmt, what=q)
            elif q.startswith(("random.", "numpy.random.")) and q.count(".") <= 2:
                yield h("CG403", node, c.stmt, what=q)
            elif q.startswith("torch.") and q.count(".") == 1 and q[6:] in RANDOM_FACTORIES:
                if c.kwarg("device") is None and c.kwarg("generator") is None and q[6:] in ("rand", "randn", "randint", "randperm"):
                    yield h("CG403", node, c.stmt, what=f"{q}() without device=")
            elif q in _CHECKPOINT:
                if not is_false(c.kwarg("preserve_rng_state")):
                    yield h("CG410", node, c.stmt)
            gen = c.kwarg("generator")
            if gen is not None and not (type(gen) is ast.Constant and gen.value is None):
                if register_seen is None:
                    register_seen = "register_generator_state" in f.module.text
                if not register_seen:
                    yield h("CG409", node, c.stmt, what=text_of(gen))
            continue
        m = c.meth
        if m is None:
            continue
        recv = c.recv
        value = node.func.value
        if m in _LOG_METHODS and (
            (type(recv) is tuple and recv[0] == "logger") or (type(value) is ast.Name and value.id in _LOGGER_NAMES)
        ):
            yield h("CG401", node, c.stmt, what=f"`{text_of(value)}.{m}()`")
        elif m == "write" and type(recv) is tuple and recv[0] == "file":
            yield h("CG401", node, c.stmt, what=f"`{text_of(value)}.write()`")
        elif m in _WRITER_METHODS and not is_tensor(recv):
            yield h("CG401", node, c.stmt, what=f"`{text_of(value)}.{m}()`")
        elif m in ("manual_seed", "get_state", "set_state", "seed") and type(recv) is tuple and recv[0] == "generator":
            yield h("CG408", node, c.stmt, what=f"{text_of(value)}.{m}()")
        elif m in _MUTATORS and _persistent_container(f, value):
            yield h("CG402", node, c.stmt, what=f"`{text_of(value)}.{m}()`")
        if m is not None:
            gen = c.kwarg("generator")
            if gen is not None and not (type(gen) is ast.Constant and gen.value is None):
                if register_seen is None:
                    register_seen = "register_generator_state" in f.module.text
                if not register_seen:
                    yield h("CG409", node, c.stmt, what=text_of(gen))


def _persistent_container(f, value) -> bool:
    """``self.history`` or a module-level list: state that outlives one call of the function."""
    t = type(value)
    if t is ast.Attribute:
        base = value.value
        if type(base) is ast.Name and base.id == f.self_name and f.cls is not None:
            kind = f.cls.attr_kind(value.attr, f.project)
            return not is_tensor(kind) and type(kind) is not tuple
        return False
    if t is ast.Name:
        name = value.id
        if type(f.fref.node) is ast.Module or name in f.params:
            return False
        if any(s.name == name for s in f.stores):
            return False
        mod = f.project.module_facts(f.module)
        return mod is not None and any(s.name == name for s in mod.stores)
    return False


def _scan_state(f):
    is_module = type(f.fref.node) is ast.Module
    for attr, stmt, value in f.self_stores:
        t = type(stmt)
        if t is ast.AugAssign:
            if type(stmt.value) is ast.Constant and isinstance(stmt.value.value, (int, float)):
                kind = f.cls.attr_kind(attr, f.project) if f.cls is not None else None
                if not is_tensor(kind):
                    yield h("CG402", stmt, stmt, what=f"`self.{attr} {_op(stmt.op)}= ...`")
        elif value is not None and _reads_self_attr(value, f.self_name, attr):
            kind = f.cls.attr_kind(attr, f.project) if f.cls is not None else None
            value_kind = f.infer(value)
            if is_tensor(kind) or is_tensor(value_kind):
                yield h("CG406", stmt, stmt, what=attr)
            elif type(value) is ast.BinOp and _is_number(value.right):
                yield h("CG402", stmt, stmt, what=f"`self.{attr} = self.{attr} ...`")
    if not is_module and f.global_names:
        for store in f.stores:
            if store.aug and store.name in f.global_names:
                yield h("CG402", store.node, store.node, what=f"global `{store.name}` update")


def _scan_scalars(f):
    project = f.project
    if f.cls is not None and f.self_loads:
        updates = {}
        for cls in f.cls.mro(project):
            for attr, line in cls.attrs(project).scalar_updates.items():
                updates.setdefault(attr, (line, cls))
        if updates:
            seen = set()
            for node in f.self_loads:
                attr = node.attr
                if attr in updates and attr not in seen:
                    seen.add(attr)
                    line, cls = updates[attr]
                    yield h("CG404", node, None, what=f"self.{attr}", detail=f" (it is set at L{line} in {cls.name})")
    if type(f.fref.node) is not ast.Module:
        mutable = f.module.mutable_globals(project)
        if mutable:
            local = {s.name for s in f.stores} | set(f.params)
            seen = set()
            for node in f.loads:
                name = node.id
                if name in mutable and name not in local and name not in seen and name not in f.global_names:
                    seen.add(name)
                    yield h("CG404", node, None, what=name, detail=f" (it is rebound at L{mutable[name]})")
        for name, arg in f.param_nodes.items():
            ann = arg.annotation
            if type(ann) is ast.Name and ann.id in _SCALAR_ANNOTATIONS:
                yield h("CG404", arg, None, root_only=True, what=name, detail=" (a Python-number parameter of the captured function)")


def _reads_self_attr(value, self_name, attr) -> bool:
    for node in ast.walk(value):
        if type(node) is ast.Attribute and node.attr == attr and type(node.value) is ast.Name and node.value.id == self_name:
            return True
    return False


def _is_number(node) -> bool:
    return type(node) is ast.Constant and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)


def _op(op) -> str:
    return {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}.get(type(op), "?")


# -- around a manual capture --------------------------------------------------------------------
def scan_region(region, ctx):
    """Inputs rebound after capture, outputs kept across replays, scalars changed after capture."""
    if region.span is None or region.scope is None:
        return
    sf = ctx.project.facts(region.scope)
    start, end = region.span
    rs, re_ = region.stmt.lineno, region.stmt.end_lineno
    loops = [(a.lineno, a.end_lineno) for a in region.ancestors if type(a) in (ast.For, ast.While, ast.AsyncFor)]

    def later(line: int) -> bool:
        return line > re_ or any(lo <= line <= hi for lo, hi in loops)

    in_span_stores = {}
    for s in sf.stores:
        if start <= s.node.lineno <= end:
            in_span_stores.setdefault(s.name, s)
    reads: dict[str, ast.Name] = {}
    for n in sf.loads:
        if start <= n.lineno <= end and n.id not in reads:
            store = in_span_stores.get(n.id)
            if store is None or store.node.lineno > n.lineno:
                reads[n.id] = n
    module = region.module
    reported = set()
    for s in sf.stores:
        line = s.node.lineno
        if s.name not in reads or rs <= line <= re_ or not later(line) or s.name in reported:
            continue
        before = _kind_before(sf, s.name, rs)
        if is_tensor(before):
            if s.aug:
                continue  # x += y on a tensor updates it in place
            reported.add(s.name)
            yield rh("CG405", module, s.node, what=s.name, line=region.line, how="rebound")
        elif before is None and _is_scalar_value(sf, s):
            reported.add(s.name)
            read = reads[s.name]
            yield rh("CG404", module, read, what=s.name, detail=f" (it is rebound at L{line})")
    for name, stmt in sf.dels:
        if name in reads and later(stmt.lineno) and is_tensor(_kind_before(sf, name, rs)) and name not in reported:
            reported.add(name)
            yield rh("CG405", module, stmt, what=name, line=region.line, how="deleted")
    outputs = set(in_span_stores)
    for name, stmt in sf.escapes:
        if name in outputs and later(stmt.lineno) and not (rs <= stmt.lineno <= re_):
            yield rh("CG407", module, stmt, what=name)
    # Host containers and counters that live outside the region, updated inside it.
    for c in sf.calls:
        line = c.node.lineno
        if start <= line <= end and c.meth in _MUTATORS:
            value = c.node.func.value
            kind = sf.kinds.get(value.id) if type(value) is ast.Name else None
            if type(value) is ast.Name and value.id not in in_span_stores and not is_tensor(kind) and type(kind) is not tuple:
                if any(s.name == value.id for s in sf.stores):
                    yield rh("CG402", module, c.node, what=f"`{value.id}.{c.meth}()`")
    for s in sf.stores:
        if s.aug and start <= s.node.lineno <= end and s.name in reads and not is_tensor(_kind_before(sf, s.name, rs)):
            yield rh("CG402", module, s.node, what=f"`{s.name} {_op(s.node.op)}= ...`")


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
