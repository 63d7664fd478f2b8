"""``cgkit trace``: run the step that would be captured, eagerly, and name every operation a CUDA graph
cannot hold, with the user's line and the library line where it happened.

Static analysis (``cgkit check``) stops where the user's code calls into a library; this runs the
code, so it sees inside ``torch.nn``, ``torch.optim`` and any other library the step calls. It works
on a CPU (the CPU stands in for the GPU; see :mod:`cgkit.trace.recorder`) and on a GPU, where torch's
own sync detector adds a cross-check. Findings use ``cgkit check``'s rule codes and output formats.

Usage from Python::

    from cgkit.trace import TraceOptions, trace_step, trace_script
    result = trace_step(TraceOptions(model="my_model.py:build", inputs="my_model.py:example"))
    for finding in result.findings:
        print(finding.path, finding.line, finding.code, finding.trace["library"])

This package imports torch; ``cgkit check`` and ``cgkit scaffold`` never import it.
"""

from __future__ import annotations

from cgkit.trace.report import TraceResult
from cgkit.trace.session import StepFailed, TraceOptions, validate


def trace_step(options: TraceOptions) -> TraceResult:
    """Trace ``model(*inputs)`` (or a training step, or ``--step``) as ``options`` describe it."""
    from cgkit.trace import session

    return session.run(options)


def trace_script(path: str, argv: list[str] | None = None, device: str = "auto",
                 output_to_stderr: bool = False) -> TraceResult:
    """Run a script with its capture regions traced (its printed output to stderr if asked)."""
    from cgkit.trace import script, steps

    return script.run(path, list(argv or []), steps.resolve_device(device), output_to_stderr)


__all__ = ["StepFailed", "TraceOptions", "TraceResult", "trace_script", "trace_step", "validate"]
