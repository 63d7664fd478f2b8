"""Trace a whole script: its capture regions run eagerly, and are recorded.

``cgkit trace SCRIPT.py`` runs the script as ``__main__`` with the capture APIs replaced for the
time of the run:

* ``with torch.cuda.graph(g):`` and ``g.capture_begin()``/``capture_end()`` record their body
  instead of capturing it (the body runs eagerly). ``g.replay()`` runs the recorded ``with`` body
  again, as eager code would at that point, and compares it with the capture: another operator, a
  Python number that changed, or a tensor read at another address is what the real replay would
  get wrong.
* ``torch.cuda.make_graphed_callables`` checks hooks and autocast caching, records one call as the
  capture, and returns the callables, each later call recorded and compared with the capture.
* ``torch.compile(..., mode="reduce-overhead")`` (or any CUDA-graph mode) returns the function
  itself, each call recorded with torch.compile severities; its first call inside a manual capture,
  and in-place changes to its inputs, are reported.
* Streams are followed inside regions: a side stream that is not joined back, and the default
  stream used inside a capture.

On a CPU the CUDA API the script touches is stood in for (graphs, streams, events, generators,
``device="cuda"``), so a script written for the GPU runs; on a GPU only the capture APIs change.
"""

from __future__ import annotations

import ast
import contextlib
import linecache
import os
import runpy
import sys
import time
from dataclasses import dataclass, field

import torch

from cgkit.errors import CgkitError
from cgkit.trace import compare, frames, report
from cgkit.trace.frames import Location, Site, short_path
from cgkit.trace.recorder import Recorder

frames.HOOK_FILES.add(__file__)

_GRAPH_MODES = ("reduce-overhead", "max-autotune")
_MATMULS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear"})


@dataclass
class Region:
    """One capture region of the script: where it is, what its capture did."""

    kind: str  # "torch.cuda.graph", "capture_begin", "make_graphed_callables", "torch.compile"
    site: Site
    klass: str = "manual"
    log: list = field(default_factory=list)
    made: frozenset = frozenset()
    body: object = None  # compiled ``with`` body, run again on replay
    scope: object = None  # the frame the body ran in
    replays: int = 0
    compared: bool = False  # a divergence was reported already (one per region)

    def as_dict(self) -> dict:
        return {"kind": self.kind, "name": self.kind, "line": self.site.line, "path": short_path(self.site.path)}


class ScriptTrace:
    """The state of one script run: the recorder, the regions, and what the shims saw."""

    def __init__(self, device: torch.device):
        self.device = device
        self.recorder = Recorder(device.type)
        self.regions: list[Region] = []
        self.findings: list = []
        self.current: Region | None = None
        self.streams = _StreamWatch(self)
        self._captured: dict[int, Region] = {}  # graph object id -> its region
        self._stack = contextlib.ExitStack()
        self.recorder.eager_ops = set()  # operators run outside any capture: the warm-up evidence
        self.region_failure: tuple[Region, BaseException] | None = None  # what a capture region raised

    # -- regions ---------------------------------------------------------------------------------------
    def begin(self, kind: str, frame, graph=None, klass: str = "manual") -> Region:
        site = frames.site_of(frame)
        if graph is not None and id(graph) in self._captured:
            first = self._captured[id(graph)]
            self.report_now("CG509", "this CUDAGraph", frame, Region(kind, site), line=first.site.line,
                            operation="capture into a graph that already holds one")
        region = Region(kind, site, klass)
        if kind == "torch.cuda.graph":
            region.body, region.scope = _with_body(frame), frame
        if graph is not None:
            self._captured[id(graph)] = region
        self.regions.append(region)
        self.current = region
        self.streams.begin()
        self._stack.enter_context(self.recorder.recording("capture"))
        return region

    def end(self, region: Region, failure: BaseException | None = None) -> None:
        if failure is not None:
            self.region_failure = (region, failure)
        self._stack.close()
        self._stack = contextlib.ExitStack()
        region.log, region.made = self.recorder.last_log, self.recorder.last_made_addresses
        self._collect(region)
        self.streams.end(region)
        if region.klass == "manual":
            self._check_warm_up(region)
        self.current = None

    def replay(self, graph) -> None:
        region = self._captured.get(id(graph))
        if region is None or region.body is None:
            return
        region.replays += 1
        scope = region.scope
        self.current = region
        try:
            with self.recorder.recording(f"replay {region.replays}"):
                _run_in_frame(region.body, scope)
        finally:
            self.current = None
        self._collect(region)
        self.compare(region, self.recorder.last_log, addresses=True)

    def call_recorded(self, region: Region, label: str, fn, *args, **kwargs):
        """One call of a graphed callable or compiled function, recorded and compared with the first."""
        previous = self.current
        self.current = region
        try:
            with self.recorder.recording(label):
                out = fn(*args, **kwargs)
        finally:
            self.current = previous
        self._collect(region)
        if not region.log:
            region.log = self.recorder.last_log
        else:
            self.compare(region, self.recorder.last_log, addresses=False)
        return out

    def compare(self, region: Region, log: list, addresses: bool) -> None:
        if region.compared:
            return
        first = "capture" if region.kind != "torch.compile" else "the first call"
        later = f"replay {region.replays}" if region.kind != "torch.compile" else "a later call"
        divergence = compare.first_divergence(region.log, log, (first, later), addresses, region.made)
        if divergence is None:
            return
        region.compared = True
        f = report.finding(divergence.code, divergence.what, divergence.later, region.site, region.as_dict(),
                           region.klass, [later], operation=divergence.operation, earlier=divergence.earlier,
                           detail=divergence.detail, line=region.site.line, how="rebound")
        if f is not None and not any((g.path, g.line) == (f.path, f.line) for g in self.findings):
            self.findings.append(f)

    def _collect(self, region: Region) -> None:
        for seen in self.recorder.observations:
            f = report.finding(seen.code, seen.what, seen.location, region.site, region.as_dict(), region.klass,
                               [seen.call], operation=seen.operation, apis=(seen.api,) if seen.api else (), **seen.args)
            if f is not None:
                self.findings.append(f)
        self.recorder.observations.clear()

    def report_now(self, code: str, what: str, frame, region: Region, operation: str = "", **args) -> None:
        f = report.finding(code, what, frames.locate(frame), region.site, region.as_dict(), region.klass,
                           ["capture"], operation=operation, **args)
        if f is not None:
            self.findings.append(f)

    # -- warm-up --------------------------------------------------------------------------------------
    def _check_warm_up(self, region: Region) -> None:
        """The first matrix product or backward of the process inside a capture: library set-up
        (cuBLAS handles and workspaces, autograd's device threads) happens in the capture and fails."""
        names = {r.op._schema.name for r in region.log}
        before = self.recorder.eager_ops
        first = sorted((names & _MATMULS) - before)
        backward = any(n.endswith("_backward") for n in names) and not any(n.endswith("_backward") for n in before)
        if first or backward:
            what = f"`{first[0].split('::')[1]}`" if first else "backward"
            f = report.finding("CG508", what, Location(region.site, None), region.site, region.as_dict(),
                               region.klass, ["capture"], operation="first run of the process inside a capture")
            if f is not None:
                self.findings.append(f)
        before |= names


def _run_in_frame(code, frame) -> None:
    """Run the user's own ``with`` body again in the frame it was written in, as eager code would run
    at this point: it reads the names' current values, and what it assigns stays assigned."""
    if frame.f_code.co_name == "<module>":
        exec(code, frame.f_globals)  # noqa: S102
        return
    names = frame.f_locals  # a snapshot dict before Python 3.13 (a write-through proxy after)
    exec(code, frame.f_globals, names)  # noqa: S102
    if sys.version_info < (3, 13):
        import ctypes

        try:  # write the snapshot back into the frame's fast locals
            ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))
        except (AttributeError, ValueError, TypeError):
            pass


def _with_body(frame):
    """The body of the ``with`` statement at the frame's current line, compiled to run again."""
    path, line = frame.f_code.co_filename, frame.f_lineno
    source = "".join(linecache.getlines(path))
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.With, ast.AsyncWith)) and node.lineno <= line < node.body[0].lineno:
            try:
                return compile(ast.Module(body=node.body, type_ignores=[]), path, "exec")
            except SyntaxError:  # a `return` or `yield` in the body: it cannot run on its own
                return None
    return None


# -- the shims ---------------------------------------------------------------------------------------


class _GraphContext:
    """Stands in for ``torch.cuda.graph``: the body runs eagerly and is recorded."""

    trace: ScriptTrace

    def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode="global", **kwargs):
        self.graph = cuda_graph
        self.stream = stream
        self.region = None

    def __enter__(self):
        frame = frames.caller()
        if self.stream is not None:
            self.trace.streams.capture_stream = self.stream
        self.region = self.trace.begin("torch.cuda.graph", frame, self.graph)
        return self.graph

    def __exit__(self, exc_type, exc, tb):
        self.trace.end(self.region, failure=exc)
        return False


class _Graph:
    """Stands in for ``torch.cuda.CUDAGraph``: capture_begin/end mark a region, replay re-runs it."""

    trace: ScriptTrace

    def __init__(self, *args, **kwargs):
        self._region = None

    def capture_begin(self, *args, **kwargs):
        frame = frames.caller()
        self._region = self.trace.begin("capture_begin", frame, self)
        if _is_default_stream(torch.cuda.current_stream()):  # torch.cuda.graph() moves to a side stream itself
            self.trace.report_now("CG603", "capture_begin()", frame, self._region,
                                  operation="capture begun on the default stream")

    def capture_end(self):
        if self._region is not None:
            self.trace.end(self._region)

    def replay(self):
        self.trace.replay(self)

    def reset(self):
        self.trace._captured.pop(id(self), None)

    def register_generator_state(self, generator):
        self.trace.recorder.registered_generators[id(generator)] = generator

    def pool(self):
        return (0, id(self))

    def instantiate(self):
        return None

    def enable_debug_mode(self):
        return None

    def debug_dump(self, path):
        return None


def _make_graphed_callables(trace: ScriptTrace):
    def make_graphed_callables(callables, sample_args, num_warmup_iters=3, allow_unused_input=False, pool=None,
                               **kwargs):
        frame = frames.caller()
        single = not isinstance(callables, tuple)
        items = (callables,) if single else callables
        samples = (sample_args,) if single else sample_args
        region = Region("make_graphed_callables", frames.site_of(frame))
        trace.regions.append(region)
        if torch.is_autocast_enabled(trace.device.type) and torch.is_autocast_cache_enabled():
            trace.report_now("CG501", "make_graphed_callables", frame, region,
                             operation="autocast with cache_enabled=True")
        out = []
        for fn, args in zip(items, samples, strict=True):
            for leaf in torch.utils._pytree.tree_leaves(args):
                if not isinstance(leaf, torch.Tensor):  # torch refuses it before capturing anything
                    trace.report_now("CG513", repr(leaf), frame, region, operation="a sample input that is no tensor",
                                     api="make_graphed_callables", error="AssertionError")
            if isinstance(fn, torch.nn.Module) and _has_hooks(fn):
                trace.report_now("CG503", "a module hook", frame, region, operation="module hooks at graphing time")
            part = Region("make_graphed_callables", region.site)
            trace.regions.append(part)
            with trace.recorder.warming():
                fn(*args)
            trace.call_recorded(part, "capture", fn, *args)
            out.append(_Graphed(trace, part, fn))
        return out[0] if single else tuple(out)

    return make_graphed_callables


def _has_hooks(module: torch.nn.Module) -> bool:
    names = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
    return any(getattr(m, n, None) for m in module.modules() for n in names)


class _Graphed:
    """What make_graphed_callables returns here: the callable, each call recorded as a replay."""

    def __init__(self, trace: ScriptTrace, region: Region, fn):
        self._trace, self._region, self._fn = trace, region, fn

    def __call__(self, *args, **kwargs):
        if kwargs:  # torch's graphed callables take positional tensors only: this call raises TypeError
            self._trace.report_now("CG511", getattr(self._fn, "__name__", type(self._fn).__name__), frames.caller(),
                                   self._region, operation="keyword arguments to a graphed callable",
                                   keywords=", ".join(f"`{k}=`" for k in kwargs))
        self._region.replays += 1
        return self._trace.call_recorded(self._region, f"replay {self._region.replays}", self._fn, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._fn, name)


def _compile(trace: ScriptTrace, original):
    def compile(model=None, *, mode=None, options=None, **kwargs):
        if model is None:
            return lambda fn: compile(fn, mode=mode, options=options, **kwargs)
        graphs = mode in _GRAPH_MODES or bool((options or {}).get("triton.cudagraphs"))
        region = Region("torch.compile", frames.site_of(frames.caller()), klass="compile")
        if graphs:
            trace.regions.append(region)
        return _Compiled(trace, region, model, graphs)

    compile.__wrapped__ = original
    return compile


class _Compiled:
    """A ``torch.compile``d function, run eagerly. With a CUDA-graph mode each call is recorded and
    compared with the first; in any mode, a first call inside a manual capture is reported."""

    def __init__(self, trace: ScriptTrace, region: Region, fn, graphs: bool):
        self._trace, self._region, self._fn, self._graphs = trace, region, fn, graphs
        self._calls = 0

    def __call__(self, *args, **kwargs):
        trace = self._trace
        self._calls += 1
        outer = trace.current
        if self._calls == 1 and outer is not None and outer.klass == "manual":
            trace.report_now("CG507", getattr(self._fn, "__name__", "the compiled function"), frames.caller(), outer,
                             operation="first call of a compiled function inside a capture")
        if not self._graphs and outer is None:
            return self._fn(*args, **kwargs)  # no CUDA graphs and no capture around it: nothing to trace
        inputs = {id(a) for a in args if isinstance(a, torch.Tensor)} if self._graphs else None
        trace.recorder.watch_inputs = inputs
        try:
            if outer is not None:  # inside a manual capture: part of that region's recording
                return self._fn(*args, **kwargs)
            return trace.call_recorded(self._region, f"call {self._calls}", self._fn, *args, **kwargs)
        finally:
            trace.recorder.watch_inputs = None

    def __getattr__(self, name):
        return getattr(self._fn, name)


class _StreamWatch:
    """Streams inside a region: forked side streams must be joined back; the default stream is outside."""

    def __init__(self, trace: ScriptTrace):
        self.trace = trace
        self.capture_stream = None
        self.forked: dict[int, tuple] = {}  # side stream id -> (stream, frame site of first use)
        self.joined: set[int] = set()

    def begin(self) -> None:
        self.forked.clear()
        self.joined.clear()

    def used(self, stream, frame) -> None:
        region = self.trace.current
        if region is None or region.klass != "manual":
            return
        if _is_default_stream(stream):
            self.trace.report_now("CG602", "torch.cuda.default_stream()", frame, region,
                                  operation="work queued on the default stream during capture")
        elif id(stream) not in self.forked and stream is not self.capture_stream:
            self.forked[id(stream)] = (stream, frames.site_of(frame))

    def waited(self, waiter, waited_on) -> None:
        if self.trace.current is not None and id(waited_on) in self.forked:
            self.joined.add(id(waited_on))

    def end(self, region: Region) -> None:
        for key, (_stream, site) in self.forked.items():
            if key not in self.joined:
                f = report.finding("CG601", "side stream", Location(site, None), region.site, region.as_dict(),
                                   region.klass, ["capture"], operation="a side stream's work is not joined back",
                                   problem="not joined back to the capturing stream")
                if f is not None:
                    self.trace.findings.append(f)
        self.capture_stream = None


def _is_default_stream(stream) -> bool:
    if isinstance(stream, _FakeStream):
        return stream.default
    try:
        return stream == torch.cuda.default_stream(stream.device)
    except (RuntimeError, AttributeError):
        return False


class _FakeStream:
    """A CUDA stream on a CPU: records nothing, waits for nothing."""

    _default = None

    def __init__(self, device=None, priority=0, default=False, **kwargs):
        self.default = default
        self.device = torch.device("cpu")

    def wait_stream(self, other):
        _FakeStream.watch.waited(self, other)

    def wait_event(self, event):
        return None

    def record_event(self, event=None):
        return event or _FakeEvent()

    def synchronize(self):
        return None

    def query(self):
        return True

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)


class _CpuGenerator(torch.Generator):
    """``torch.Generator(device="cuda")`` on a CPU: a CPU generator (still reported as a custom one)."""

    def __new__(cls, device="cpu"):
        return super().__new__(cls)

    def __init__(self, device="cpu"):
        super().__init__()


def _cpu_autocast(original):
    """``torch.autocast("cuda", ...)`` on a CPU: the same autocast on the CPU."""

    class autocast(original):  # noqa: N801 - stands in for torch.autocast
        def __init__(self, device_type, *args, **kwargs):
            super().__init__("cpu" if device_type == "cuda" else device_type, *args, **kwargs)

    return autocast


def _cpu_grad_scaler(original):
    """``torch.amp.GradScaler("cuda")`` on a CPU: the same scaler on the CPU (otherwise it disables itself)."""

    class GradScaler(original):
        def __init__(self, device="cuda", *args, **kwargs):
            super().__init__("cpu" if device == "cuda" else device, *args, **kwargs)

    return GradScaler


class _FakeEvent:
    def __init__(self, *args, **kwargs):
        pass

    def record(self, stream=None):
        return None

    def wait(self, stream=None):
        return None

    def synchronize(self):
        return None

    def query(self):
        return True

    def elapsed_time(self, other):
        return 0.0


class _Shims:
    """Replace the capture APIs (and, on a CPU, the CUDA API) for the time of the run."""

    def __init__(self, trace: ScriptTrace):
        self.trace = trace
        self.saved: list[tuple[object, str, object]] = []

    def set(self, owner, name, value):
        self.saved.append((owner, name, getattr(owner, name, None)))
        setattr(owner, name, value)

    def __enter__(self):
        trace, cuda = self.trace, torch.cuda
        _GraphContext.trace = trace
        _Graph.trace = trace
        self.set(cuda, "graph", _GraphContext)
        self.set(cuda, "CUDAGraph", _Graph)
        self.set(cuda, "make_graphed_callables", _make_graphed_callables(trace))
        self.set(torch, "compile", _compile(trace, torch.compile))
        self.set(cuda, "is_current_stream_capturing", lambda: trace.current is not None)
        if trace.device.type == "cpu":
            self._cpu_cuda()
        else:
            self._watch_real_streams()
        return self

    def _cpu_cuda(self):
        trace, cuda = self.trace, torch.cuda
        _FakeStream.watch = trace.streams
        default = _FakeStream(default=True)
        current = [default]

        @contextlib.contextmanager
        def stream(s):
            if s is None:
                yield
                return
            trace.streams.used(s, frames.caller())
            previous = current[0]
            current[0] = s
            try:
                yield
            finally:
                current[0] = previous

        self.set(cuda, "Stream", _FakeStream)
        self.set(cuda, "Event", _FakeEvent)
        self.set(cuda, "stream", stream)
        self.set(cuda, "current_stream", lambda device=None: current[0])
        self.set(cuda, "default_stream", lambda device=None: default)
        self.set(cuda, "set_stream", lambda s: current.__setitem__(0, s))
        self.set(cuda, "device", lambda device=None: contextlib.nullcontext())
        self.set(cuda, "current_device", lambda: 0)
        self.set(cuda, "device_count", lambda: 1)
        self.set(cuda, "get_device_name", lambda device=None: "CPU (standing in for a GPU)")
        self.set(cuda, "memory_allocated", lambda device=None: 0)
        self.set(cuda, "memory_reserved", lambda device=None: 0)
        self.set(cuda, "graph_pool_handle", lambda: (0, 0))
        self.set(cuda, "manual_seed", lambda seed: None)
        self.set(cuda, "manual_seed_all", lambda seed: None)
        self.set(torch, "Generator", _CpuGenerator)
        self.set(torch, "autocast", _cpu_autocast(torch.autocast))
        self.set(torch.amp, "autocast", torch.autocast)
        self.set(torch.amp, "GradScaler", _cpu_grad_scaler(torch.amp.GradScaler))

    def _watch_real_streams(self):
        trace, cuda = self.trace, torch.cuda
        original_stream = cuda.stream
        original_wait = cuda.Stream.wait_stream

        def stream(s):
            if s is not None:
                trace.streams.used(s, frames.caller())
            return original_stream(s)

        def wait_stream(self_, other):
            trace.streams.waited(self_, other)
            return original_wait(self_, other)

        self.set(cuda, "stream", stream)
        self.set(cuda.Stream, "wait_stream", wait_stream)

    def __exit__(self, *exc):
        for owner, name, value in reversed(self.saved):
            setattr(owner, name, value)
        return False


def run(path: str, argv: list[str], device: torch.device, output_to_stderr: bool = False) -> report.TraceResult:
    """Run a script with its capture regions traced; findings from every region.

    ``output_to_stderr`` sends what the script prints to stderr, so a machine-read report on stdout
    (json, sarif) stays parseable."""
    if not os.path.isfile(path):
        raise CgkitError(f"no such script: {path}")
    started = time.perf_counter()
    trace = ScriptTrace(device)
    trace.recorder.marking = True
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [path, *argv]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))  # as `python SCRIPT` does
    errors: list[str] = []
    notes_on_stop: list[str] = []
    try:
        output = contextlib.redirect_stdout(sys.stderr) if output_to_stderr else contextlib.nullcontext()
        with output, _Shims(trace), trace.recorder.active():
            runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            errors.append(f"the script exited with status {exc.code}")
    except CgkitError:
        raise
    except Exception as exc:  # the script itself failed: say where, keep what was found before
        from cgkit.trace.session import failure_text

        text = failure_text(exc, "the script")
        region = trace.current or (trace.region_failure[0] if trace.region_failure and
                                   trace.region_failure[1] is exc else None)
        if region is not None:
            trace._collect(region)
        if region is not None and trace.findings:
            # A capture region raised, as real capture does on what was found there: say so, keep the findings.
            notes_on_stop.append(f"the script stopped inside the capture region at line {region.site.line}: {text}")
        else:
            errors.append(text)
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    words = "GPU" if device.type == "cuda" else "CPU (standing in for the GPU)"
    regions = len(trace.regions)
    notes = notes_on_stop + ([] if regions else [
        "no capture region ran: nothing was recorded (the script captures no graph, or the capture code did "
        "not run with these arguments)"])
    return report.TraceResult(
        report.merge(trace.findings), errors, files=1,
        scope=f"{short_path(path)}, {regions} capture region(s), on the {words}",
        device=str(device), calls=sum(r.replays for r in trace.regions), seconds=time.perf_counter() - started,
        notes=notes,
    )


