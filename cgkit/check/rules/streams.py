"""CG6xx: streams inside and around a captured region."""

from __future__ import annotations

import ast

from cgkit.check.callers import call_sites
from cgkit.check.facts import facts_of
from cgkit.check.model import Rule
from cgkit.check.rules._base import Calls, Each, Family, Region, code, found, text_of

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
    if forked and not joined:
        joined = _joined_through_event(with_node, stream, f)
    if not forked or not joined:
        problem = "never joined back into the capturing stream" if forked else "not forked from the capturing stream"
        if not forked and not joined:
            problem = "neither forked from nor joined back into the capturing stream"
        yield found(with_node, with_node, what=name, problem=problem)


def _joined_through_event(with_node, stream_expr, f) -> bool:
    """The block records an event on the side stream (``self.ready[slot].record(self.copy_stream)``, inside
    the block or after it with the stream named) that code of the file waits on
    (``torch.cuda.current_stream().wait_event(self.ready[slot])``, ``ev.wait()``), as a prefetch helper does
    with its consumer in another method, or a custom autograd function's forward with its backward: the
    wait is the join."""
    stream = text_of(stream_expr)
    recorded = {_event_base(c.node.func.value) for c in f.calls if c.meth == "record" and (
        with_node.lineno <= c.node.lineno <= with_node.end_lineno  # on the side stream, inside its block
        or (c.node.lineno > with_node.end_lineno and c.node.args and text_of(c.node.args[0]) == stream))}
    recorded.discard(None)
    if not recorded:
        return False
    for n in ast.walk(f.module.tree):
        if type(n) is not ast.Call or type(n.func) is not ast.Attribute:
            continue
        if n.func.attr == "wait_event" and n.args and _event_base(n.args[0]) in recorded:
            return True
        if n.func.attr == "wait" and _event_base(n.func.value) in recorded:
            return True
    return False


def _event_base(expr) -> str | None:
    """``self.ready`` for ``self.ready[slot]``: events kept in a list are one family."""
    while type(expr) is ast.Subscript:
        expr = expr.value
    return text_of(expr) if type(expr) in (ast.Name, ast.Attribute) else None


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


_SET_STREAM = ("torch.cuda.set_stream", "torch.accelerator.set_stream")


@RULES.rule(
    Rule(
        code="CG603",
        name="capture-on-default-stream",
        category="stream",
        message="the capture into `{what}` runs on the default stream ({how}): capture fails here",
        fix="Capture on a side stream: `s = torch.cuda.Stream()`, `s.wait_stream(torch.cuda.current_stream())`, "
        "then `with torch.cuda.stream(s): g.capture_begin() ... g.capture_end()` "
        "(`with torch.cuda.graph(g)` does this for you).",
        compile=None,
        what="Checks for `CUDAGraph.capture_begin()` called in a script, in a function the script calls, "
        "in a function that also replays the graph or in a method that a replaying method of its class calls, with no `torch.cuda.stream(...)` context or `set_stream` "
        "around it; and for `torch.cuda.graph(g, stream=torch.cuda.default_stream())`, or `stream=torch.cuda.current_stream()` "
        "with no side stream set in the function or around any call of it in the checked files. A `capture_begin` "
        "inside a library function whose callers are not in view is not reported (they may set the stream), "
        "unless that function itself warmed up on a side stream and left it before capturing.",
        why="PyTorch refuses to capture on the default stream: `capture_begin` raises \"CUDA graphs must "
        "be captured on a non-default stream\". `with torch.cuda.graph(g)` switches to a side stream by "
        "itself; the raw `capture_begin()`/`capture_end()` pair does not, so the code around it must.",
        example=code("""
            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            g.capture_begin()
            y = x * 2
            g.capture_end()
        """),
        use_instead=code("""
            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                g.capture_begin()
                y = x * 2
                g.capture_end()
            torch.cuda.current_stream().wait_stream(s)
            g.replay()
        """),
        gpu_check="torch.cuda.synchronize()\nok = torch.equal(y, x * 2)",
    ),
    Region(),
)
def capture_on_default_stream(region, ctx):
    if region.kind == "torch.cuda.graph":
        stream = next((kw.value for kw in region.node.keywords if kw.arg == "stream"), None)
        if type(stream) is ast.Call and type(stream.func) is ast.Attribute and stream.func.attr == "default_stream":
            yield found(stream, what=text_of(region.graph_expr), how="`stream=` names the default stream")
        elif _current_stream(stream, region, ctx) and (_on_default_stream(region, ctx) or _no_side_stream_in_view(region, ctx)):
            yield found(stream, what=text_of(region.graph_expr),
                        how="`stream=current_stream()` with no side stream set is the default stream")
        return
    if region.kind == "capture_begin" and _on_default_stream(region, ctx):
        yield found(region.node, what=text_of(region.graph_expr), how="`capture_begin()` with no side stream around it")


def _current_stream(stream, region, ctx) -> bool:
    """``torch.cuda.current_stream()``, or a name the function bound to it just before."""
    if type(stream) is ast.Name and region.scope is not None:
        bound = [s for s in facts_of(ctx.project, region.scope).stores
                 if s.name == stream.id and s.node.lineno < region.stmt.lineno and type(s.node) is ast.Assign]
        stream = bound[-1].node.value if bound else None
    return type(stream) is ast.Call and type(stream.func) is ast.Attribute and stream.func.attr == "current_stream"


def _no_side_stream_in_view(region, ctx) -> bool:
    """``torch.cuda.graph(g, stream=torch.cuda.current_stream())`` asks for the stream the code runs on, which
    is the default one unless something set a side stream: none is set in the function, nor around any call
    of it (or of its callers) in the checked files."""
    if region.scope is None:
        return False
    sf = facts_of(ctx.project, region.scope)
    return not _on_side_stream(sf, region.stmt.lineno) and not _called_on_side_stream(region.scope, ctx, 0)


def _called_on_side_stream(fref, ctx, depth: int) -> bool:
    if depth > 3 or type(fref.node) is ast.Module:
        return False
    constructor = fref.name == "__init__" and fref.cls is not None
    for caller, call in call_sites(ctx.project, fref.cls.name if constructor else fref.name, fref):
        facts = facts_of(ctx.project, caller)
        if _on_side_stream(facts, call.lineno) or _called_on_side_stream(caller, ctx, depth + 1):
            return True
    return False


def _on_default_stream(region, ctx) -> bool:
    """The region's statement runs on the default stream: no side-stream context or set_stream in its
    function, and either it is the script's own code, the function replays the graph itself (it drives
    the loop), or the script's top level calls it off any side stream. Otherwise (library code whose
    callers are out of view): unknown, so not reported."""
    if region.scope is None:
        return False
    sf = facts_of(ctx.project, region.scope)
    if _on_side_stream(sf, region.stmt.lineno):
        return False
    if type(region.scope.node) is ast.Module or _replays_itself(sf, region) or _replaying_caller(region, ctx):
        return True
    if any(w.end_lineno < region.stmt.lineno for w, _ in sf.stream_withs):
        return True  # it warmed up on a side stream, left it, and captures on the stream it came back to
    for c in sf.calls:  # ``self._warmup()`` ran on a side stream and came back before the capture
        if c.node.lineno < region.stmt.lineno and not _on_side_stream(sf, c.node.lineno):
            if any(facts_of(ctx.project, t).stream_withs for t in ctx.resolve(sf, c)):
                return True
    # A helper: only when the script itself runs it, off any side stream: its file's top-level code calls
    # it, directly or through functions of the file (callers further away, a library's users, may well
    # set the stream).
    return _script_runs_off_side_streams(region.scope, region.module, ctx, depth=0)


def _script_runs_off_side_streams(fref, module, ctx, depth: int) -> bool:
    """Every call of ``fref`` in its file is off a side stream, and at least one chain of such calls
    reaches the file's top level (``main()`` called under ``if __name__ == "__main__":``)."""
    if depth > 3:
        return False
    constructor = fref.name == "__init__" and fref.cls is not None  # ``Runner(model)`` runs ``__init__``
    name = fref.cls.name if constructor else fref.name
    callers = [(facts_of(ctx.project, caller), call) for caller, call in call_sites(ctx.project, name, fref)
               if caller.module is module]
    if fref.cls is not None and not constructor:  # ``up.capture()`` calls this class's method, not another's
        callers = [(facts, call) for facts, call in callers if _calls_scope(facts, call, fref, ctx)]
    if not callers or any(_on_side_stream(facts, call.lineno) for facts, call in callers):
        return False
    return any(type(facts.fref.node) is ast.Module or _script_runs_off_side_streams(facts.fref, module, ctx, depth + 1)
               for facts, _call in callers)


def _calls_scope(facts, call, scope, ctx) -> bool:
    site = next((c for c in facts.calls if c.node is call), None)
    return site is not None and any(t.key == scope.key for t in ctx.resolve(facts, site))


def _replaying_caller(region, ctx) -> bool:
    """A method of the same class calls the capturing method off any side stream and replays the graph
    itself (``if self.graph is None: self.capture()`` then ``self.graph.replay()``): it drives the loop."""
    scope = region.scope
    if scope.cls is None:
        return False
    for caller, call in call_sites(ctx.project, scope.name, scope):
        if caller.cls is not scope.cls:
            continue
        facts = facts_of(ctx.project, caller)
        if _calls_scope(facts, call, scope, ctx) and not _on_side_stream(facts, call.lineno) \
                and _replays_itself(facts, region):
            return True
    return False


def _replays_itself(facts, region) -> bool:
    graph = text_of(region.graph_expr)
    return any(c.meth == "replay" and text_of(c.node.func.value) == graph for c in facts.calls)


def _on_side_stream(facts, line: int) -> bool:
    """``line`` runs inside ``with torch.cuda.stream(...)``, or after a ``set_stream`` in the same code."""
    if any(w.lineno <= line <= w.end_lineno for w, _ in facts.stream_withs):
        return True
    return any(c.qual in _SET_STREAM and c.node.lineno < line for c in facts.calls)
