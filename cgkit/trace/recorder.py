"""Run code eagerly and record every operation a CUDA graph could not hold.

Two torch modes watch the code: a ``TorchFunctionMode`` sees the Python API the user (or a
library) called (``.item()``, ``.cpu()``, ``torch.tensor(...)``), and a ``TorchDispatchMode`` sees the
ATen operators underneath, whose tags say which ones sync, have data-dependent shapes or draw random
numbers (:mod:`cgkit.trace.ops`). Host calls that are no torch operators (``torch.cuda.synchronize``,
reseeding, Python's ``random``) are wrapped for the time of the trace, and a global optimizer hook
looks at every ``step()``.

On a GPU, devices are real. On a CPU the CPU stands in for the GPU ("emulation"): tensors the step
makes from Python data, or without a device, or with the device given as the text ``"cpu"``, are
host tensors; everything else (parameters, inputs, tensors made with ``device=x.device``) counts as
device data. ``"cuda"`` devices are mapped to the CPU so code written for the GPU runs, and a move
between host and device returns a new tensor, as it would on the GPU.
"""

from __future__ import annotations

import contextlib
import math
import random
import sys
import warnings
from dataclasses import dataclass, field

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook
from torch.overrides import TorchFunctionMode, resolve_name
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.weak import WeakIdKeyDictionary

from cgkit.trace import frames, ops
from cgkit.trace.frames import Location

frames.HOOK_FILES.add(__file__)

# Provenance of a host tensor: made on the host, from Python data, or in pinned memory.
HOST, FROM_DATA, PINNED = "host", "data", "pinned"
_SYNC_WARNING = "called a synchronizing CUDA operation"


@dataclass
class Observation:
    """One hazard seen while the code ran."""

    code: str
    what: str  # the operation in the user's terms (".item()", "torch.equal"), for the rule's message
    location: Location
    call: str  # which call saw it: "call 2", "capture", "replay 1"
    operation: str = ""  # the ATen operator or host function underneath
    args: dict = field(default_factory=dict)  # extra values for the rule's message
    api: str | None = None  # the innermost torch API it ran under ("torch.nn.functional.one_hot")


@dataclass
class OpRecord:
    """One operator of a recorded call: enough to tell two calls apart, and where it ran."""

    op: object
    signature: tuple
    site: tuple | None  # (file, line) of the user's frame
    caller: tuple | None  # (file, line) of the frame that called it
    inputs: tuple = ()  # (position, data_ptr) of tensors read that the call did not make itself


class Recorder:
    """Holds the modes' shared state: what is recorded, and which tensors are on the host."""

    def __init__(self, device: str):
        self.on_gpu = device == "cuda"
        self.emulate = not self.on_gpu
        self._origin = WeakIdKeyDictionary()  # host tensors (emulation) and tensors from Python data
        self.observations: list[Observation] = []
        self.call: str | None = None  # the label of the call being recorded, or None
        self.marking = False  # track provenance (script mode: always; step mode: inside calls)
        self.oplog: list[OpRecord] | None = None
        self.made: set[int] | None = None  # ids of tensors made by the call being recorded
        self.made_addresses: set[int] | None = None  # and their data addresses
        self.last_log: list[OpRecord] = []
        self.last_made_addresses: frozenset = frozenset()
        self._apis: list = []  # the Python APIs being run, innermost last
        self._reported: list[bool] = []  # whether the API at the same depth already reported
        self._internal = 0  # > 0 while the tracer runs its own operators
        self._host_factory = 0  # > 0 while a factory runs whose result is a host tensor (emulation)
        self.api = None  # the innermost torch API being called (for advice keyed on an API)
        self.api_call: tuple | None = None  # and its (func, args, kwargs)
        self._sync_mode: str | None = None  # GPU: torch's sync detector is armed while a call is recorded
        self._function_mode = _FunctionMode(self)
        self._dispatch_mode = _DispatchMode(self)
        self.ignore_optimizers: WeakIdKeyDictionary = WeakIdKeyDictionary()  # built by the tracer
        self.watch_inputs: set[int] | None = None  # ids of a compiled function's inputs (in-place updates)
        self.eager_ops: set[str] | None = None  # names of operators run outside recorded calls, if kept
        self.registered_generators: dict[int, object] = {}  # register_generator_state (id -> generator)

    # -- provenance ---------------------------------------------------------------------------------
    def is_host(self, t: torch.Tensor) -> bool:
        if self.on_gpu:
            return t.device.type == "cpu"
        return t in self._origin

    def from_data(self, t: torch.Tensor) -> bool:
        return self._origin.get(t) == FROM_DATA

    def is_pinned(self, t: torch.Tensor) -> bool:
        return t.is_pinned() if self.on_gpu else self._origin.get(t) == PINNED

    def mark(self, t, origin: str | None) -> None:
        if not isinstance(t, torch.Tensor):
            return
        if origin is None:
            self._origin.pop(t, None)
        elif self.emulate or origin == FROM_DATA:
            self._origin[t] = origin

    @contextlib.contextmanager
    def internal(self):
        """Operators the tracer runs itself: not recorded, not classified."""
        self._internal += 1
        try:
            yield
        finally:
            self._internal -= 1

    # -- recording ----------------------------------------------------------------------------------
    def observe(self, code: str, what: str, operation: str = "", frame=None, **args) -> None:
        if self.call is None:
            return
        if self._apis:
            self._reported[-1] = True
        location = frames.locate(frame if frame is not None else frames.caller())
        api = resolve_name(self.api) if self.api is not None else None
        self.observations.append(Observation(code, what, location, self.call, operation, args, api))

    @contextlib.contextmanager
    def recording(self, call: str, log_ops: bool = True):
        """Record hazards (and, with ``log_ops``, the operator sequence) of one call."""
        previous = (self.call, self.oplog, self.made, self.made_addresses, self.marking)
        self.call, self.marking = call, True
        self.oplog = [] if log_ops else None
        self.made, self.made_addresses = set(), set()
        self._set_sync_detector(True)
        try:
            yield self
        finally:
            self._set_sync_detector(previous[0] is not None)
            self.last_log, self.last_made_addresses = self.oplog or [], frozenset(self.made_addresses)
            self.call, self.oplog, self.made, self.made_addresses, self.marking = previous

    @contextlib.contextmanager
    def warming(self):
        """A call that is not recorded (a warm-up), with provenance kept for what it leaves behind."""
        previous = self.marking
        self.marking = True
        try:
            yield self
        finally:
            self.marking = previous

    @contextlib.contextmanager
    def active(self, device_map: bool = True):
        """Both modes, the host-call wrappers and the optimizer hook, for the time of a trace."""
        with contextlib.ExitStack() as stack:
            stack.enter_context(_HostCalls(self))
            handle = register_optimizer_step_pre_hook(self._optimizer_step)
            stack.callback(handle.remove)
            if self.on_gpu:
                stack.enter_context(self._sync_debug())
            stack.enter_context(self._function_mode)
            stack.enter_context(self._dispatch_mode)
            yield self

    @contextlib.contextmanager
    def _sync_debug(self):
        """torch's own sync detector, as a cross-check on the GPU: in "error" mode while a call is
        recorded, an operator that syncs raises at that operator (also in autograd's worker threads,
        whose warnings would only come back after backward); the dispatch mode notes it and runs
        the operator again with the detector off."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*[Ss]ynchronization debug mode.*")
            warnings.filterwarnings("ignore", message=".*set_sync_debug_mode.*")
            previous = torch.cuda.get_sync_debug_mode()
            self._sync_mode = "error"
            try:
                yield
            finally:
                self._sync_mode = None
                torch.cuda.set_sync_debug_mode(previous)

    @contextlib.contextmanager
    def sync_debug_off(self):
        """Run something that syncs on purpose (an API already reported, the tracer's own work)."""
        if not self._sync_mode or torch.cuda.get_sync_debug_mode() == 0:
            yield
            return
        torch.cuda.set_sync_debug_mode(0)
        try:
            yield
        finally:
            torch.cuda.set_sync_debug_mode(self._sync_mode)

    def _set_sync_detector(self, on: bool) -> None:
        if self._sync_mode:
            torch.cuda.set_sync_debug_mode(self._sync_mode if on else 0)

    def _optimizer_step(self, optimizer, args, kwargs):
        if optimizer in self.ignore_optimizers:
            return
        groups = [g for g in optimizer.param_groups if "capturable" in g]
        if self.emulate:
            _cpu_capturable(optimizer, groups)
        if self.call is None:
            return
        if groups and not all(g["capturable"] or g.get("_cgkit_capturable") for g in groups):
            name = type(optimizer).__name__
            self.observe("CG502", f"{name}.step()", operation=f"torch.optim.{name}.step", frame=sys._getframe(1),
                         cls=name, message=f"`{name}.step()` runs in the step, but the optimizer was built "
                         "without `capturable=True`; capture fails here")


def _cpu_capturable(optimizer, groups) -> None:
    """On a CPU, ``capturable=True`` (GPU only) becomes ``fused=True``: the same graph-safe step, with
    step counters on the parameters' device; the group remembers it was capturable."""
    for group in groups:
        if group["capturable"] and "fused" in group:
            group.update(capturable=False, fused=True, foreach=False, _cgkit_capturable=True)


# -- the function mode: Python APIs ------------------------------------------------------------------


def _device_intent(value) -> str:
    """HOST when a device argument names the CPU as text, else device (emulation's convention)."""
    if isinstance(value, str) and value.split(":")[0] == "cpu":
        return HOST
    return "device"


def _to_cpu(value):
    """A ``"cuda"`` device argument, mapped to the CPU (emulation)."""
    if isinstance(value, (str, torch.device)) and torch.device(value).type == "cuda":
        return torch.device("cpu")
    if isinstance(value, int) and not isinstance(value, bool):
        return torch.device("cpu")
    return value


def _device_argument(args, kwargs):
    """(index or key, value) of the device argument of ``Tensor.to``/``cuda``, or (None, None)."""
    if "device" in kwargs:
        return "device", kwargs["device"]
    for index, value in enumerate(args[1:], start=1):
        if isinstance(value, (str, torch.device)) or (isinstance(value, int) and not isinstance(value, bool)):
            return index, value
        if isinstance(value, torch.Tensor):
            return index, value
    return None, None


class _FunctionMode(TorchFunctionMode):
    def __init__(self, recorder: Recorder):
        super().__init__()
        self.rec = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        rec = self.rec
        if kwargs is None:
            kwargs = {}
        if rec._internal:
            return func(*args, **kwargs)
        outer = (rec.api, rec.api_call)
        rec.api, rec.api_call = func, (func, args, kwargs)
        try:
            return self._dispatch(func, args, kwargs)
        finally:
            rec.api, rec.api_call = outer

    def _dispatch(self, func, args, kwargs):
        rec = self.rec
        generator = kwargs.get("generator")
        if generator is not None and rec.call is not None and not ops.is_default_generator(generator) \
                and id(generator) not in rec.registered_generators:
            frame = frames.caller()
            rec.observe("CG409", _generator_name(frame), operation=ops.api_name(func), frame=frame)
        if func in ops.MOVE_APIS:
            handler = self._move
        elif "device" in kwargs or func in ops.DATA_APIS:
            handler = self._create
        elif func in ops.SYNC_APIS or func in ops.TO_HOST_APIS:
            handler = self._watched
        elif rec.emulate and rec.marking and getattr(func, "__name__", None) in ops.HOST_OUTPUTS:
            out = func(*args, **kwargs)
            for index in ops.HOST_OUTPUTS[func.__name__]:
                rec.mark(out[index], HOST)
            return out
        elif not (rec.emulate and rec.marking) or _has_tensor(args, kwargs):
            return func(*args, **kwargs)
        else:
            return self._host_factory(func, args, kwargs)  # a factory given no device: made on the host
        # An API that may report: what it reports, its operators need not report again.
        rec._apis.append(func)
        rec._reported.append(False)
        try:
            if func in ops.REPORTED_BY_API:
                with rec.sync_debug_off():  # reported as what the user called; its copies need not be
                    return handler(func, args, kwargs)
            return handler(func, args, kwargs)
        finally:
            rec._apis.pop()
            rec._reported.pop()

    def _watched(self, func, args, kwargs):
        """A Python API that reads device data on the host (``.cpu()``, ``print(t)``) or may sync."""
        rec = self.rec
        if rec.call is not None and func in ops.TO_HOST_APIS and self._on_device(args[0]):
            rec.observe("CG102", ops.TO_HOST_APIS[func], operation="device-to-host copy", frame=frames.caller())
        elif rec.call is not None and func in ops.PRINT_APIS and self._on_device(args[0]):
            code, what = ops.sync_code(func, "")
            rec.observe(code, what, operation="device-to-host copy", frame=frames.caller())
        return func(*args, **kwargs)

    def _host_factory(self, func, args, kwargs, origin=HOST):
        """Run a function whose tensor result is made on the host; its operators see that already."""
        rec = self.rec
        rec._host_factory += 1
        try:
            out = func(*args, **kwargs)
        finally:
            rec._host_factory -= 1
        if isinstance(out, torch.Tensor):
            rec.mark(out, origin)
        return out

    def _on_device(self, t) -> bool:
        return isinstance(t, torch.Tensor) and not self.rec.is_host(t)

    def _create(self, func, args, kwargs):
        """A factory or a tensor from Python data: host or device, by its device argument."""
        rec = self.rec
        given = "device" in kwargs
        intent = _device_intent(kwargs["device"]) if given else HOST
        if rec.emulate and given:
            kwargs = {**kwargs, "device": _to_cpu(kwargs["device"])}
        out = func(*args, **kwargs)
        if not rec.marking or not isinstance(out, torch.Tensor):
            return out
        from_data = func in ops.DATA_APIS
        if from_data and intent == HOST and rec.call is not None and self._made_from_device(args):
            rec.observe("CG102", f'{ops.api_name(func)}(tensor, device="cpu")', operation="device-to-host copy",
                        frame=frames.caller())
        if from_data and intent != HOST and rec.call is not None and not self._made_from_device(args):
            rec.observe("CG301", f"{ops.api_name(func)}(..., device=...)", operation="host-to-device copy",
                        frame=frames.caller())
        if intent == HOST:
            rec.mark(out, FROM_DATA if from_data else HOST)
        elif from_data or rec.emulate:
            rec.mark(out, None)
        if rec.made is not None:
            rec.made.add(id(out))
        return out

    def _made_from_device(self, args) -> bool:
        """``torch.tensor(t)`` of a tensor already on the device is a device copy, not host data."""
        return bool(args) and isinstance(args[0], torch.Tensor) and not self.rec.is_host(args[0])

    def _move(self, func, args, kwargs):
        """``.to()``, ``.cuda()``, ``.cpu()``, ``.pin_memory()``: a copy between host and device."""
        rec = self.rec
        source = args[0]
        if func is ops.T.pin_memory:
            if rec.call is not None:
                rec.observe("CG304", ".pin_memory()", operation="pinned host allocation", frame=frames.caller())
            if not rec.emulate:
                return self._moved(source, func(*args, **kwargs), HOST)
            with rec.internal():
                out = source.clone()
            if rec.marking:
                rec.mark(out, PINNED)
            return out
        if func is ops.T.cpu:
            target = HOST
        elif func is ops.T.cuda:
            target = "device"
        else:
            key, value = _device_argument(args, kwargs)
            if key is None:
                return func(*args, **kwargs)
            if isinstance(value, torch.Tensor):
                target = HOST if rec.is_host(value) else "device"
            else:
                target = _device_intent(value)
        if rec.emulate:
            if func is ops.T.cuda:
                func, args, kwargs = ops.T.to, (source, torch.device("cpu")), {
                    k: v for k, v in kwargs.items() if k in ("non_blocking", "memory_format")}
            else:
                args, kwargs = _map_device_args(func, args, kwargs)
        source_host = rec.is_host(source)
        if rec.call is not None and source_host != (target == HOST):
            self._report_move(source, source_host, func)
        out = func(*args, **kwargs)
        return self._moved(source, out, target)

    def _report_move(self, source, source_host: bool, func) -> None:
        rec = self.rec
        if not source_host:
            rec.observe("CG102", ".cpu()" if func is ops.T.cpu else '.to("cpu")',
                        operation="device-to-host copy", frame=frames.caller())
        elif rec.from_data(source):
            rec.observe("CG301", ".cuda()" if func is ops.T.cuda else ".to(device)", operation="host-to-device copy",
                        frame=frames.caller())
        elif not rec.is_pinned(source):  # a copy from pinned memory can be captured
            rec.observe("CG302", ".cuda()" if func is ops.T.cuda else ".to(device)",
                        operation="pageable host-to-device copy", frame=frames.caller())

    def _moved(self, source, out, target: str):
        """The tensor a move returns: new, with the target's provenance (emulation copies)."""
        rec = self.rec
        if not isinstance(out, torch.Tensor) or not rec.marking:
            return out
        if rec.emulate and out is source and rec.is_host(source) != (target == HOST):
            with rec.internal():
                out = source.clone()
        if target == HOST:
            rec.mark(out, FROM_DATA if rec.from_data(source) else HOST)
        else:
            rec.mark(out, None)
        if rec.made is not None:
            rec.made.add(id(out))
        return out


def _writes_first_argument(op) -> bool:
    """An in-place operator (``add_``, ``copy_``): its schema marks the first argument as written."""
    arguments = op._schema.arguments
    alias = arguments[0].alias_info if arguments else None
    return alias is not None and alias.is_write


def _accumulating_gradients() -> bool:
    """Autograd is writing a ``.grad``: created on one call, added to on the next, by design (a graph
    writes the gradients it created at capture on every replay), so not compared between calls."""
    node = torch._C._current_autograd_node()
    return node is not None and node.name().endswith("AccumulateGrad")


def _has_tensor(args, kwargs) -> bool:
    return any(True for _ in _tensors(args, kwargs))


def _map_device_args(func, args, kwargs):
    if "device" in kwargs:
        kwargs = {**kwargs, "device": _to_cpu(kwargs["device"])}
    args = tuple(_to_cpu(a) if i and not isinstance(a, (torch.Tensor, torch.dtype, bool)) else a
                 for i, a in enumerate(args))
    return args, kwargs


# -- the dispatch mode: ATen operators ---------------------------------------------------------------


def _signature(value):
    """A comparable summary of an operator argument: shapes and dtypes of tensors, values of the rest."""
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), value.dtype)
    if isinstance(value, (list, tuple)):
        return tuple(_signature(v) for v in value)
    if value is None or isinstance(value, (bool, int, float, str, torch.dtype, torch.device, torch.layout,
                                           torch.memory_format)):
        return value
    return type(value).__name__


def _tensors(args, kwargs):
    for value in args:
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (list, tuple)):
            yield from (v for v in value if isinstance(v, torch.Tensor))
    for value in kwargs.values():
        if isinstance(value, torch.Tensor):
            yield value


def _outputs(out):
    if isinstance(out, torch.Tensor):
        return (out,)
    if isinstance(out, (list, tuple)):
        return tuple(o for o in out if isinstance(o, torch.Tensor))
    return ()


def op_name(op) -> str:
    return str(op).replace("aten.", "aten.", 1)


class _DispatchMode(TorchDispatchMode):
    def __init__(self, recorder: Recorder):
        super().__init__()
        self.rec = recorder

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        rec = self.rec
        if kwargs is None:
            kwargs = {}
        if rec._internal or not rec.marking:
            return func(*args, **kwargs)
        synced = False
        if rec._sync_mode and rec.call is not None:
            try:
                out = func(*args, **kwargs)
            except RuntimeError as exc:
                if _SYNC_WARNING not in str(exc):
                    raise
                synced = True
                with rec.sync_debug_off():
                    out = func(*args, **kwargs)
        else:
            out = func(*args, **kwargs)
        name = func._schema.name
        inputs = list(_tensors(args, kwargs)) if rec.on_gpu or len(rec._origin) else None
        if inputs is not None and len(rec._origin):
            self._propagate(func, name, inputs, out)
        if rec._host_factory and not inputs:
            for t in _outputs(out):
                rec.mark(t, HOST)
        elif name in ops.FROM_PYTHON_DATA:
            for t in _outputs(out):
                rec.mark(t, FROM_DATA)
                if rec.on_gpu and t.device.type == "cuda" and rec.call is not None and not (
                        rec._reported and rec._reported[-1]):
                    self._from_data_on_device()
        if rec.call is None:
            if rec.eager_ops is not None:
                rec.eager_ops.add(name)
            return out
        found = self._classify(func, name, args, kwargs, out, inputs)
        if rec.watch_inputs and args and isinstance(args[0], torch.Tensor) and id(args[0]) in rec.watch_inputs \
                and _writes_first_argument(func):
            rec.observe("CG510", name.split("::")[-1], operation=op_name(func), frame=frames.caller())
        if synced and not found:
            node = torch._C._current_autograd_node()
            where = f", in the backward of {node.name()}" if node is not None else ""
            rec.observe("CG103", op_name(func), operation=f"{op_name(func)} (torch's sync debug mode{where})",
                        frame=frames.caller(),
                        message=f"`{op_name(func)}` synchronizes with the GPU (torch's sync detector){where}; "
                                "capture fails here")
        if rec.oplog is not None and not _accumulating_gradients():
            frame = frames.caller()
            caller = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else None
            signature = (_signature(args), _signature(tuple(kwargs.items())), self._host_scalars(inputs))
            rec.oplog.append(OpRecord(func, signature, frames.user_site(frame), caller, self._read_inputs(args)))
        if rec.made is not None:
            for t in _outputs(out):
                rec.made.add(id(t))
                if t.device.type != "meta":
                    rec.made_addresses.add(t.data_ptr())
        return out

    def _from_data_on_device(self) -> None:
        """A tensor made from Python data straight on the GPU (torch copied it over before the mode
        saw it): an index list (``x[[0, 5]]``) or ``torch.tensor(data, device="cuda")``."""
        rec = self.rec
        indexing = bool(rec._apis) and rec._apis[-1] is ops.T.__getitem__
        if indexing:
            rec.observe("CG303", "a Python list", operation="host-to-device copy of an index", frame=frames.caller())
        else:
            rec.observe("CG301", "tensor data from Python", operation="host-to-device copy", frame=frames.caller())

    def _read_inputs(self, args) -> tuple:
        """(position, data address) of the tensors this operator reads that the call did not make."""
        made = self.rec.made
        found = []
        for index, value in enumerate(args):
            if isinstance(value, torch.Tensor) and id(value) not in made and value.device.type != "meta":
                try:
                    found.append((index, value.data_ptr()))
                except RuntimeError:  # tensors without storage (sparse, some subclasses)
                    pass
        return tuple(found)

    def _propagate(self, func, name, inputs, out) -> None:
        """Emulation: an operator's outputs are host tensors when all its tensor inputs are."""
        rec = self.rec
        outs = _outputs(out)
        if not outs:
            return
        if name in ops.FROM_PYTHON_DATA:
            for t in outs:
                rec.mark(t, FROM_DATA)
            return
        if not inputs:
            return
        host = [rec.is_host(t) for t in inputs]
        if all(host):
            origin = FROM_DATA if all(rec.from_data(t) for t in inputs) else HOST
            for t in outs:
                if not any(t is i for i in inputs):
                    rec.mark(t, origin)
        elif any(host):
            on_host = ops.HOST_OUTPUTS.get(name, ())
            for index, t in enumerate(outs):
                if not any(t is i for i in inputs):
                    rec.mark(t, HOST if index in on_host else None)

    def _classify(self, func, name, args, kwargs, out, inputs) -> bool:
        """Observe what this operator means for a graph; True when something was found."""
        rec = self.rec
        reported = rec._reported[-1] if rec._reported else False
        kind = ops.kind_of(func)
        if kind == ops.SYNC:
            source = next(iter(_tensors(args, kwargs)), None)
            if source is None or rec.is_host(source) or reported or self._cpu_only_read():
                return reported
            api = next((a for a in reversed(rec._apis) if a in ops.SYNC_APIS), None)
            frame = frames.caller()
            code, what = ops.sync_code(api, frames.site_of(frame).source if frame else "")
            extra = {} if api is not None else {
                "message": f"`{op_name(func)}` reads a tensor's value on the host; capture fails here"}
            rec.observe(code, what, operation=op_name(func), frame=frame, **extra)
            return True
        if kind == ops.DYNAMIC:
            if ops.is_dynamic_shape(func, args, kwargs):
                rec.observe(ops.dynamic_code(func), func._schema.name.split("::")[-1],
                            operation=op_name(func), frame=frames.caller())
                return True
        elif kind == ops.RNG:
            return self._rng(func, args, kwargs, out)
        if name in ops.COPIES:
            return self._copy(func, name, args, kwargs, out, reported)
        if name in ops.PIN_MEMORY and not reported:
            rec.observe("CG304", "pin_memory", operation=op_name(func), frame=frames.caller())
            return True
        if inputs:
            return self._mixed(func, name, inputs, reported)
        return False

    def _rng(self, func, args, kwargs, out) -> bool:
        rec = self.rec
        outs = _outputs(out)
        if outs and rec.is_host(outs[0]):
            rec.observe("CG403", func._schema.name.split("::")[-1],
                        operation=op_name(func), frame=frames.caller())
            return True
        return False  # a custom generator is seen where the user passes it (the function mode)

    def _copy(self, func, name, args, kwargs, out, reported) -> bool:
        """A copy between host and device (real devices on the GPU; provenance in emulation)."""
        rec = self.rec
        if reported:
            return True
        if name == "aten::copy_":
            destination, source = args[0], args[1]
        else:
            source, destination = args[0], _outputs(out)[0] if _outputs(out) else None
        if destination is None or not isinstance(source, torch.Tensor):
            return False
        source_host, destination_host = rec.is_host(source), rec.is_host(destination)
        if source_host == destination_host or source.dim() == 0 and source_host and name == "aten::copy_":
            return False
        if not source_host:
            rec.observe("CG102", "copy_", operation=op_name(func), frame=frames.caller())
        elif rec.from_data(source):
            rec.observe("CG301", "a tensor made from Python data", operation=op_name(func), frame=frames.caller())
        elif rec.is_pinned(source):
            return False
        else:
            rec.observe("CG302", "copy_", operation=op_name(func), frame=frames.caller())
        return True

    def _mixed(self, func, name, inputs, reported) -> bool:
        """Host tensors read by an operator on device data: an index, copied over inside the operator."""
        rec = self.rec
        host = [t for t in inputs if rec.is_host(t)]
        if not host or len(host) == len(inputs) or reported:
            return False
        if name in ops.INDEXING and any(t.dim() > 0 or t.dtype in (torch.long, torch.int, torch.bool) for t in host):
            rec.observe("CG303", "a host index tensor", operation=op_name(func), frame=frames.caller())
            return True
        return False

    def _cpu_only_read(self) -> bool:
        """Emulation: a read that only the CPU kernel of the API being called makes."""
        if not self.rec.emulate or self.rec.api_call is None:
            return False
        func, args, kwargs = self.rec.api_call
        reads_on_cuda = ops.CUDA_READS_ONLY_IF.get(resolve_name(func) or "")
        return reads_on_cuda is not None and not reads_on_cuda(args, kwargs)

    def _host_scalars(self, inputs) -> tuple:
        """Values of CPU scalar tensors an operator on device data reads: the kernel gets them as numbers
        at launch, so a graph keeps the captured ones (compared between calls like Python numbers).

        Only scalars that Python code made (from data, or on the host in emulation) count: CPU scalars
        that operators pass each other (an attention kernel's RNG seed and offset) are theirs to manage."""
        rec = self.rec
        if not inputs or all(rec.is_host(t) for t in inputs):
            return ()
        with rec.internal():
            return tuple(t.item() for t in inputs if t.dim() == 0 and rec.is_host(t) and t in rec._origin)


# -- host calls that are no torch operators ---------------------------------------------------------


class _HostCalls:
    """Wrap host functions for the time of a trace: syncs, queries, reseeding and the CUDA RNG state, Python's RNG.

    On a CPU the CUDA ones do nothing (there is no device to wait for); they are still reported.
    """

    def __init__(self, recorder: Recorder):
        self.rec = recorder
        self._saved: list[tuple[object, str, object]] = []

    def __enter__(self):
        cuda = torch.cuda
        self._wrap(cuda, "synchronize", "CG104", "torch.cuda.synchronize()")
        self._wrap(cuda, "empty_cache", "CG305", "torch.cuda.empty_cache()")
        for owner, label in ((getattr(cuda, "Stream", None), "Stream"), (getattr(cuda, "Event", None), "Event")):
            if isinstance(owner, type):
                self._wrap(owner, "synchronize", "CG104", f"{label}.synchronize()", method=True)
                self._wrap(owner, "query", "CG105", f"{label}.query()", method=True)
        self._wrap(torch, "manual_seed", "CG408", "torch.manual_seed", seed=True)
        self._wrap(torch.random, "manual_seed", "CG408", "torch.manual_seed", seed=True)
        self._wrap(cuda, "manual_seed", "CG408", "torch.cuda.manual_seed", seed=True)
        self._wrap(cuda, "manual_seed_all", "CG408", "torch.cuda.manual_seed_all", seed=True)
        self._wrap(cuda, "get_rng_state", "CG413", "torch.cuda.get_rng_state")
        self._wrap(cuda, "set_rng_state", "CG413", "torch.cuda.set_rng_state")
        self._wrap(cuda, "seed", "CG408", "torch.cuda.seed")
        for name in ("random", "uniform", "randint", "randrange", "gauss", "normalvariate", "choice",
                     "choices", "shuffle", "sample", "betavariate", "expovariate"):
            self._wrap(random, name, "CG403", f"random.{name}()")
        numpy_random = sys.modules.get("numpy.random")
        if numpy_random is not None:
            for name in ("rand", "randn", "randint", "random", "uniform", "normal", "choice", "permutation",
                         "shuffle"):
                self._wrap(numpy_random, name, "CG403", f"numpy.random.{name}()")
        return self

    def __exit__(self, *exc):
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()
        return False

    def _wrap(self, owner, name, code, what, method=False, seed=False):
        original = getattr(owner, name, None)
        if original is None:
            return
        rec = self.rec
        is_cuda = code in ("CG104", "CG105", "CG305") or (what.startswith("torch.cuda") and code in ("CG408", "CG413"))
        does_nothing = rec.emulate and is_cuda

        def wrapper(*args, **kwargs):
            if rec.call is not None and not (seed and rec.on_gpu and _same_seed(args, kwargs)):
                rec.observe(code, what, operation=what, frame=frames.caller())
            if does_nothing:
                return None if code != "CG105" else True
            with rec.sync_debug_off():
                return original(*args, **kwargs)

        wrapper.__wrapped__ = original
        self._saved.append((owner, name, original))
        setattr(owner, name, wrapper if not method else _as_method(wrapper))


def _generator_name(frame) -> str:
    """The generator's name as the user's line writes it (``generator=gen``), for the message."""
    import re

    found = re.search(r"generator\s*=\s*([\w.]+)", frames.site_of(frame).source) if frame is not None else None
    return found.group(1) if found else "(custom)"


def _as_method(function):
    def method(self, *args, **kwargs):
        return function(self, *args, **kwargs)

    method.__wrapped__ = function.__wrapped__
    return method


def _same_seed(args, kwargs) -> bool:
    """Re-setting the seed the CUDA generator already has is allowed during capture (torch >= 2.10).
    Only a GPU run can tell: on a CPU the CUDA generator's seed is unknown, so a reseed is reported."""
    seed = args[0] if args else kwargs.get("seed")
    try:
        return isinstance(seed, int) and seed == torch.cuda.initial_seed()
    except RuntimeError:
        return False


def same_value(a, b) -> bool:
    """Equality for operator signatures, with NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b
