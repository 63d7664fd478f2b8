"""CG7xx: what only a run shows. ``cgkit trace`` reports these; ``cgkit check`` cannot see them.

They come from calling the step more than once: Dynamo's own graph breaks and recompilations under
``torch.compile``, and a step whose operators or shapes differ between two calls with inputs of the
same shapes (a graph replays the call it captured). No matcher runs for them in ``cgkit check``.
"""

from __future__ import annotations

from cgkit.check.model import Rule
from cgkit.check.rules._base import Family, code

_RUN_ONLY = "a run-time observation: `cgkit trace` reports it, `cgkit check` cannot see it"

RULES = Family()

RULES.record(
    Rule(
        code="CG701",
        name="compile-graph-break",
        category="compile",
        message="Dynamo breaks the graph here ({what}): the CUDA graph is split and this code runs eagerly",
        compile_message="Dynamo breaks the graph here ({what}): the CUDA graph is split and this code runs eagerly",
        fix="Move the call out of the compiled function, or replace it with code Dynamo can trace; "
        "`torch.compile(..., fullgraph=True)` turns every break into an error that names it.",
        what="Reports a graph break that Dynamo makes in a function compiled with a CUDA-graph mode, for "
        "causes no more specific rule names (an untraceable C function, an explicit break).",
        why="Under `mode=\"reduce-overhead\"` every graph break ends one CUDA graph and starts another, with "
        "the code in between run by the Python interpreter: more launches, and host work on every call. "
        "Found by `cgkit trace --workflow compile`, which runs Dynamo (without Inductor, so on a CPU too) "
        "and reads its break reasons; the line is the user's line Dynamo reports.",
        example=code("""
            import zlib

            import torch


            @torch.compile(mode="reduce-overhead")
            def step(x):
                y = x.sin()
                salt = zlib.crc32(b"step") % 7  # a C function Dynamo cannot trace
                return y * salt


            def inputs():
                return (torch.randn(64, device="cuda"),)
        """),
        use_instead=code("""
            import zlib

            import torch

            SALT = zlib.crc32(b"step") % 7  # computed once, outside the compiled function


            @torch.compile(mode="reduce-overhead")
            def step(x):
                return x.sin() * SALT


            def inputs():
                return (torch.randn(64, device="cuda"),)
        """),
        manual=None,
        compile="warning",
        gpu_skip=_RUN_ONLY,
        trace="compile-step",
        static=False,
    )
)

RULES.record(
    Rule(
        code="CG702",
        name="compile-recompile",
        category="compile",
        message="{what} is recompiled on {call}: guard `{guard}` failed",
        compile_message="{what} is recompiled on {call}: guard `{guard}` failed",
        fix="Keep what the guard tests the same between calls: pass changing numbers as tensors, keep "
        "per-call counters out of the compiled function (or in a tensor updated in place).",
        what="Reports a recompilation of a function compiled with a CUDA-graph mode between calls whose "
        "tensor inputs have the same shapes.",
        why="Dynamo guards each compiled graph on the Python values and shapes it saw. When a guard fails "
        "the function is compiled again and a new CUDA graph recorded; a value that changes on every "
        "call recompiles on every call until the recompile limit, after which the function runs eagerly. "
        "Found by `cgkit trace --workflow compile`, from Dynamo's guard failures.",
        example=code("""
            import torch


            class Scaled(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.linear = torch.nn.Linear(64, 64)
                    self.calls = 0

                def forward(self, x):
                    self.calls += 1
                    return self.linear(x) * self.calls  # a Python int that changes every call


            model = Scaled().cuda()
            step = torch.compile(model, mode="reduce-overhead")


            def inputs():
                return (torch.randn(8, 64, device="cuda"),)
        """),
        use_instead=code("""
            import torch


            class Scaled(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.linear = torch.nn.Linear(64, 64)
                    self.register_buffer("calls", torch.zeros(()))

                def forward(self, x):
                    self.calls.add_(1)  # a device tensor updated in place
                    return self.linear(x) * self.calls


            model = Scaled().cuda()
            step = torch.compile(model, mode="reduce-overhead")


            def inputs():
                return (torch.randn(8, 64, device="cuda"),)
        """),
        manual=None,
        compile="warning",
        gpu_skip=_RUN_ONLY,
        trace="compile-step",
        static=False,
    )
)

RULES.record(
    Rule(
        code="CG703",
        name="step-diverges",
        category="dynamic-control-flow",
        message="{what}{detail}: a graph replays the call it captured, so the other path is never taken",
        compile_message="{what}{detail}: a new path or shape recompiles or re-records the graph",
        fix="Make the step take the same path on every call: decide outside the captured code, or compute "
        "both sides and select with `torch.where`; keep shapes fixed (pad to a bucket).",
        what="Reports the first operator where two calls of the step differ (another operator, or another "
        "shape), although their inputs have the same shapes.",
        why="A CUDA graph holds the operators, shapes and arguments of the call it captured; eager code that "
        "takes another Python branch or makes another shape on a later call is not replayed that way. "
        "Found by `cgkit trace`, which calls the step (or replays a captured region) again and compares "
        "the operators one by one; the line is where the later call went its own way.",
        example=code("""
            import torch


            class Alternating(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.linear = torch.nn.Linear(64, 64)
                    self.calls = 0

                def forward(self, x):
                    self.calls += 1
                    y = self.linear(x)
                    return y * 2 if self.calls % 2 else y  # the branch alternates between calls


            model = Alternating().cuda()
            x = torch.randn(8, 64, device="cuda")
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                model(x)  # warm-up
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = model(x)
            g.replay()
        """),
        use_instead=code("""
            import torch


            class Doubled(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.linear = torch.nn.Linear(64, 64)

                def forward(self, x):
                    return self.linear(x) * 2  # the same operators on every call


            model = Doubled().cuda()
            x = torch.randn(8, 64, device="cuda")
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                model(x)  # warm-up
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = model(x)
            g.replay()
        """),
        manual="error",
        compile="warning",
        gpu_check="torch.cuda.synchronize()\nok = torch.equal(y, model(x))",
        static=False,
    )
)
