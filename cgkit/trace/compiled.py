"""torch.compile steps: graph breaks and recompilations, from Dynamo's own reports.

Dynamo runs with the ``eager`` backend (no Inductor, no compiler needed, so this works on a CPU):
``torch._dynamo.explain`` lists the graph breaks with the user's stack, and a guard-failure callback
sees every recompilation between calls made with inputs of the same shapes. Under
``mode="reduce-overhead"`` each break splits the CUDA graph, and a recompilation on every call ends,
at the recompile limit, with the function running eagerly.
"""

from __future__ import annotations

import contextlib
import logging
import re
import warnings

import torch

from cgkit.trace import report, steps
from cgkit.trace.frames import USER, Location, Site, file_kind

# Dynamo's break reasons -> the rule that names the cause (cgkit check's codes); the rest are CG701.
_BREAK_CODES = (
    (re.compile(r"Tensor\.item\(\)"), "CG101", "`.item()`"),
    (re.compile(r"Tensor\.tolist|Tensor\.numpy|numpy\(\)"), "CG102", "a copy to the host"),
    (re.compile(r"generic_jump|data.dependent (branching|jump)|Data-dependent", re.I), "CG201", "a tensor condition"),
    (re.compile(r"[Dd]ynamic shape operator"), "CG202", "a dynamic-shape operator"),
    (re.compile(r"[Dd]ata dependent operator"), "CG103", "a data-dependent operator"),
    (re.compile(r"operator `print`|`logging\.|logger"), "CG401", "print or logging"),
)
_STACK_LINE = re.compile(r'File "([^"]+)", line (\d+)')


@contextlib.contextmanager
def _quiet_dynamo():
    """Dynamo logs and warns about each break; the findings say it once, in cgkit's words."""
    logger = logging.getLogger("torch._dynamo")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def analyse(step: steps.Step, calls: int, fallback: Site, region: dict, training: bool) -> list:
    """Graph-break and recompilation findings for ``step.forward`` under Dynamo."""
    found = []
    generator = torch.Generator().manual_seed(1)
    inputs = [step.inputs] + [steps.vary(step.inputs, generator) for _ in range(calls - 1)]
    forward = step.forward

    def call(args, kwargs):
        with torch.set_grad_enabled(training):
            return forward(args, kwargs)

    torch._dynamo.reset()
    with _quiet_dynamo():
        args, kwargs = steps.split_inputs(inputs[0])
        explained = torch._dynamo.explain(call)(args, kwargs)
        for reason in explained.break_reasons:
            code, what = _break_code(reason.reason)
            location = _stack_location([(f.filename, f.lineno, f.name) for f in reason.user_stack])
            found.append(report.finding(code, what, location, fallback, region, "compile", ["compile"],
                                        operation=f"graph break: {_reason_text(reason.reason)}"))
        torch._dynamo.reset()
        failures = []
        compiled = torch._dynamo.optimize("eager", guard_fail_fn=failures.append)(call)
        for number, data in enumerate(inputs, start=1):
            seen = len(failures)
            compiled(*steps.split_inputs(data))
            for failure in failures[seen:]:
                found.append(_recompile(failure, number, fallback, region))
        torch._dynamo.reset()
    return [f for f in found if f is not None]


def _reason_text(reason: str) -> str:
    """Dynamo's reason in one line: its title and, where given, its explanation."""
    lines = [line.strip() for line in reason.strip().splitlines() if line.strip()]
    explanation = next((line[len("Explanation:"):].strip() for line in lines if line.startswith("Explanation:")), "")
    return f"{lines[0]} ({explanation})" if explanation else lines[0]


def _break_code(reason: str) -> tuple[str, str]:
    for pattern, code, what in _BREAK_CODES:
        if pattern.search(reason):
            return code, what
    return "CG701", _reason_text(reason).split(" (")[0]


def _stack_location(stack: list[tuple[str, int, str]]) -> Location:
    """The innermost user frame of a Dynamo stack (outermost first), and the library frame below it."""
    user = library = None
    for filename, line, name in stack:
        site = Site(filename, int(line), name)
        if file_kind(filename) == USER:
            user, library = site, None
        elif user is not None and library is None:
            library = site
    return Location(user, library)


def _recompile(failure, number: int, fallback: Site, region: dict):
    reason = failure.reason
    guard = reason.strip().splitlines()[0].split("#")[0].strip()
    stack = [(m.group(1), int(m.group(2)), "") for m in _STACK_LINE.finditer(reason)]
    code = failure.orig_code
    location = _stack_location(stack) if stack else Location(Site(code.co_filename, code.co_firstlineno, code.co_name), None)
    return report.finding("CG702", f"`{code.co_name}`", location, fallback, region, "compile", [f"call {number}"],
                          operation=f"recompiled: guard `{guard}` failed", guard=guard, call=f"call {number}")
