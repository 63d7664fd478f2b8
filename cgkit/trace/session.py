"""One trace of a step: build it, call it (a warm-up, then recorded calls on varied inputs), compare.

The first call is a warm-up, as before a real capture: lazy set-up (optimizer state, caches) happens
there and is not reported. The next calls run on inputs with the same shapes and other values and
are recorded; what they do that a graph cannot hold is reported, and so is the first operator where
they part (see :mod:`cgkit.trace.compare`). For ``--workflow compile`` the model's forward also goes
through Dynamo (no Inductor: it runs on a CPU), and its graph breaks and recompilations are reported.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass

import torch

from cgkit.errors import CgkitError
from cgkit.trace import compare, compiled, report, steps
from cgkit.trace.frames import Site, file_kind, short_path
from cgkit.trace.recorder import Recorder

MIN_CALLS = 3  # a warm-up and two recorded calls


@dataclass
class TraceOptions:
    """What to trace: the scaffold options (``model``/``inputs``/...), or ``step``."""

    workflow: str | None = None
    mode: str | None = None
    model: str | None = None
    inputs: str | None = None
    loss: str | None = None
    amp: str | None = None
    optimizer: str | None = None
    step: str | None = None
    device: str = "auto"
    calls: int = MIN_CALLS


class StepFailed(CgkitError):
    """The step raised while running eagerly: trace reports where, and stops (exit status 2)."""


def validate(opts: TraceOptions) -> None:
    """Usage errors before anything is imported or run."""
    if opts.step and (opts.model or opts.loss or opts.optimizer or opts.mode or opts.amp):
        raise CgkitError("--step runs your own step as it is: it takes --inputs, not --model, --mode, "
                         "--loss, --optimizer or --amp")
    if not opts.step and not opts.model:
        raise CgkitError("give --model and --inputs (factories), --step FILE.py:fn, or a SCRIPT to run")
    if opts.model and not opts.inputs:
        raise CgkitError("--model and --inputs go together: a factory for the model and one for its example inputs")
    if opts.mode == "inference" and (opts.loss or opts.optimizer):
        raise CgkitError("--loss and --optimizer apply to --mode training only")
    if opts.calls < MIN_CALLS:
        raise CgkitError(f"--calls {opts.calls}: at least {MIN_CALLS} (a warm-up and two recorded calls)")


def run(opts: TraceOptions) -> report.TraceResult:
    validate(opts)
    started = time.perf_counter()
    device = steps.resolve_device(opts.device)
    recorder = Recorder(device.type)
    training = opts.mode == "training"
    with recorder.active():
        if opts.step:
            step = steps.user_step(opts.step, opts.inputs, device)
        else:
            step = steps.model_step(opts.model, opts.inputs, training, device, opts.loss,
                                    opts.optimizer or "adam", opts.amp, recorder)
        logs = _call(step, recorder, opts.calls)
    klass = report.klass_for("compile" if step.compiled else opts.workflow)
    region = {"kind": "trace", "name": step.name, "line": step.site.line, "path": short_path(step.site.path)}
    found = []
    for seen in recorder.observations:
        f = report.finding(seen.code, seen.what, seen.location, step.site, region, klass, [seen.call],
                           operation=seen.operation, apis=(seen.api,) if seen.api else (), **seen.args)
        if f is not None:
            found.append(f)
    for number in range(1, len(logs)):  # logs[0] is call 2
        names = (f"call {number + 1}", f"call {number + 2}")
        divergence = compare.first_divergence(logs[number - 1], logs[number], names)
        if divergence is not None:
            found += _divergence_findings(divergence, step.site, region, klass, [names[1]], found)
            break
    notes = []
    if opts.workflow == "compile" or step.compiled:
        dynamo = compiled.analyse(step, opts.calls, step.site, region, training)
        if any(f.code == "CG702" for f in dynamo):  # Dynamo's recompilations say it better than the eager diff
            found = [f for f in found if f.code not in ("CG404", "CG703") or not (f.trace or {}).get("earlier")]
        found += dynamo
        notes.append("torch.compile: graph breaks and recompilations come from Dynamo (backend 'eager', "
                     "no Inductor)")
    result = report.TraceResult(
        report.merge([f for f in found if f is not None]), [], files=0,
        scope=f"{step.name}, {opts.calls - 1} recorded calls after a warm-up, on the {_device_words(device)}",
        device=str(device), calls=opts.calls, operators=len(logs[0]) if logs else 0,
        seconds=time.perf_counter() - started, notes=notes,
    )
    return result


def _device_words(device: torch.device) -> str:
    if device.type == "cuda":
        return f"GPU ({torch.cuda.get_device_name(device)})"
    return "CPU (standing in for the GPU)"


def _call(step: steps.Step, recorder: Recorder, calls: int) -> list:
    """Call the step ``calls`` times (the first a warm-up); return each recorded call's operator log."""
    generator = torch.Generator().manual_seed(0)
    logs = []
    for number in range(1, calls + 1):
        if number == 1:
            inputs = step.inputs
        else:
            with recorder.internal():
                inputs = steps.vary(step.inputs, generator)
        args, kwargs = steps.split_inputs(inputs)
        context = recorder.warming() if number == 1 else recorder.recording(f"call {number}")
        try:
            with context:
                step.run(args, kwargs)
        except CgkitError:
            raise
        except Exception as exc:
            raise StepFailed(failure_text(exc, f"call {number}")) from exc
        if number > 1:
            logs.append(recorder.last_log)
    return logs


def failure_text(exc: BaseException, when: str) -> str:
    """Where the step raised: the user's line and the library line, from the traceback."""
    tb = exc.__traceback__
    stack = []
    while tb is not None:
        stack.append(tb.tb_frame)
        tb = tb.tb_next
    user = next((f for f in reversed(stack) if file_kind(f.f_code.co_filename) == "user"), None)
    where = ""
    if user is not None:
        site = Site(user.f_code.co_filename, _line_of(exc, user), user.f_code.co_name)
        where = f" at {short_path(site.path)}:{site.line} ({site.source})"
    last = stack[-1] if stack else None
    if last is not None and last is not user:
        where += f", in {short_path(last.f_code.co_filename)}:{_line_of(exc, last)}"
    summary = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[0]
    return (f"{when} raised{where}: {summary}. trace needs code that runs eagerly; fix this first "
            "(on a CPU, code that needs CUDA-only features can be traced on a GPU with --device cuda)")


def _line_of(exc: BaseException, frame) -> int:
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame is frame:
            return tb.tb_lineno
        tb = tb.tb_next
    return frame.f_lineno


def _divergence_findings(d: compare.Divergence, site, region, klass, calls, found) -> list:
    """The divergence as a finding, unless a finding in the same function already explains it: a host
    read, a data-dependent shape or a host random number there makes later calls differ."""
    user = d.later.user
    if user is not None and any(f.path == short_path(user.path) and (f.trace or {}).get("user")
                                and f.trace["user"]["function"] == user.function for f in found):
        return []
    f = report.finding(d.code, d.what, d.later, site, region, klass, calls, operation=d.operation,
                       earlier=d.earlier, detail=d.detail)
    return [f] if f is not None else []
