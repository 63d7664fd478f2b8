"""CG6xx: streams inside a captured region."""

from __future__ import annotations

import ast

from cgkit.check.model import Rule
from cgkit.check.rules._base import Calls, Each, Family, code, found, text_of

RULES = Family()


@RULES.rule(
    Rule(
        code="CG601",
        name="side-stream-not-joined",
        category="stream",
        message="side stream `{what}` is {problem}; capture fails at `capture_end`",
        fix="Fork and join around the block: `{what}.wait_stream(torch.cuda.current_stream())` before it, "
        "`torch.cuda.current_stream().wait_stream({what})` after it.",
        compile=None,
        what="Checks for work sent to another stream inside a captured region without the fork "
        "(`side.wait_stream(current)`) before it or the join (`current.wait_stream(side)`) after it.",
        why="A capture may span several streams only through dependencies: the side stream joins the "
        "capture by waiting on the capturing stream, and the capturing stream must wait on the side "
        "stream again before capture ends. Without the join, the capture ends with unjoined work "
        "(`cudaErrorStreamCaptureUnjoined`); without the fork, the side stream's work is not part of "
        "the graph at all.",
        example=code("""
            import torch

            x = torch.randn(64, device="cuda")
            side = torch.cuda.Stream()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    y = x * 2
        """),
        use_instead=code("""
            import torch

            x = torch.randn(64, device="cuda")
            side = torch.cuda.Stream()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    y = x * 2
                torch.cuda.current_stream().wait_stream(side)
            g.replay()
        """),
        gpu_check="torch.cuda.synchronize()\nok = torch.equal(y, x * 2)",
    ),
    Each("stream_withs"),
)
def side_stream_not_joined(item, f):
    with_node, stream = item
    if type(stream) is ast.Call:
        return  # torch.cuda.stream(torch.cuda.current_stream()) and friends
    name = text_of(stream)
    if name == "None":
        return
    lo, hi = with_node.lineno, with_node.end_lineno
    forked = joined = False
    for c in f.calls:
        if c.meth not in ("wait_stream", "wait_event"):
            continue
        line = c.node.lineno
        recv = text_of(c.node.func.value)
        arg = text_of(c.node.args[0]) if c.node.args else ""
        if line < lo and recv == name:
            forked = True
        elif line > hi and (arg == name or c.meth == "wait_event") and recv != name:
            joined = True
    if not forked or not joined:
        problem = "never joined back into the capturing stream" if forked else "not forked from the capturing stream"
        if not forked and not joined:
            problem = "neither forked from nor joined back into the capturing stream"
        yield found(with_node, with_node, what=name, problem=problem)


@RULES.rule(
    Rule(
        code="CG602",
        name="default-stream-in-region",
        category="stream",
        message="`torch.cuda.default_stream()` inside a captured region: work queued there is not part of the graph",
        fix="Use `torch.cuda.current_stream()` (the capturing stream) or a side stream forked from it.",
        compile=None,
        what="Checks for `torch.cuda.default_stream()` used inside a captured region.",
        why="Capture records the capturing stream (and streams forked from it). Measured on torch "
        "2.11 (H200, 2026-11-29): work on the default stream inside the region does not make the "
        "capture fail. That stream is not synchronized with PyTorch's capture stream, so its kernels "
        "are expected to run once, during capture, outside the graph, with no replay repeating them: "
        "a silently stale result, worse than a failed capture (the GPU test of this rule checks the "
        "replayed value). Libraries that hard-code the default stream behave the same way.",
        example=code("""
            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                with torch.cuda.stream(torch.cuda.default_stream()):
                    y = x * 2
            x.copy_(torch.randn(64, device="cuda"))  # new input for the replay
            g.replay()
        """),
        use_instead=code("""
            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x * 2  # on the current (capturing) stream
            g.replay()
        """),
        gpu_check="torch.cuda.synchronize()\nok = torch.equal(y, x * 2)",
    ),
    Calls(quals=("torch.cuda.default_stream",)),
)
def default_stream_in_region(c, f):
    yield found(c.node, c.stmt)
