"""Facts behind three check changes of 2026-12-01, run on a GPU (torch 2.11).

1. CG503: a hook on a *part* of a module handed to `torch.cuda.make_graphed_callables` (a submodule).
   torch only asserts on the modules it receives. How many times does the part's hook run: during
   warm-up and capture only, or on every call of the graphed module too?
2. CG511: a callable from `torch.cuda.make_graphed_callables` called with a keyword argument, and the
   graphed module itself called so: what is raised?
3. CG407 (compile): an output of a reduce-overhead function kept in a variable and read after another
   compiled call, in inference: two compiled plain functions, two compiled modules, the same function
   twice; and in training, a loss read after `backward()` and a compiled optimizer step.
4. CG405: a recurrent state rebound inside the captured code, against the same state copied in place.

Prints one JSON line per case.
"""

from __future__ import annotations

import json

import torch
from torch import nn


def emit(case: str, **fields) -> None:
    print(json.dumps({"case": case, **fields}), flush=True)


def error_of(fn) -> str | None:
    try:
        fn()
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - the point is to record what is raised
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    return None


def part_hooks() -> None:
    calls = {"forward": 0, "backward": 0}
    model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32)).cuda()
    model[0].register_forward_hook(lambda mod, args, out: calls.__setitem__("forward", calls["forward"] + 1))
    model[2].register_full_backward_hook(lambda mod, gin, gout: calls.__setitem__("backward", calls["backward"] + 1))
    x = torch.randn(8, 32, device="cuda", requires_grad=True)
    raised = error_of(lambda: torch.cuda.make_graphed_callables(model, (x,), num_warmup_iters=3))
    after_graphing = dict(calls)
    for _ in range(5):
        model(torch.randn(8, 32, device="cuda", requires_grad=True)).sum().backward()
    torch.cuda.synchronize()
    emit("part-hooks", graphing_raised=raised, calls_after_graphing=after_graphing, calls_after_5_more=dict(calls),
         num_warmup_iters=3)


def keyword_calls() -> None:
    fn = nn.Linear(16, 16).cuda()
    x = torch.randn(4, 16, device="cuda", requires_grad=True)
    graphed = torch.cuda.make_graphed_callables(fn, (x,))
    emit("graphed-keyword", positional=error_of(lambda: graphed(x)), keyword=error_of(lambda: graphed(input=x)))

    def plain(a, b):
        return a * b

    b = torch.randn(4, 16, device="cuda", requires_grad=True)
    graphed_fn = torch.cuda.make_graphed_callables(plain, (x, b))
    emit("graphed-function-keyword", positional=error_of(lambda: graphed_fn(x, b)),
         keyword=error_of(lambda: graphed_fn(x, b=b)))


def compiled_reads() -> None:
    x = torch.randn(64, 64, device="cuda")

    def read_after(first, second, rounds: int = 4):
        def run():
            for _ in range(rounds):
                a = first(x)
                second(x)
                a.sum().item()
        return run

    with torch.no_grad():
        torch._dynamo.reset()
        f = torch.compile(lambda t: t * 2, mode="reduce-overhead")
        g = torch.compile(lambda t: t + 1, mode="reduce-overhead")
        emit("read-after-other-plain-function", raised=error_of(read_after(f, g)))

        torch._dynamo.reset()
        m1 = torch.compile(nn.Linear(64, 64).cuda(), mode="reduce-overhead")
        m2 = torch.compile(nn.Linear(64, 64).cuda(), mode="reduce-overhead")
        emit("read-after-other-module", raised=error_of(read_after(m1, m2)))

        torch._dynamo.reset()
        f = torch.compile(lambda t: t * 2, mode="reduce-overhead")
        emit("read-after-same-function", raised=error_of(read_after(f, f)))

    torch._dynamo.reset()
    model = nn.Linear(64, 64).cuda()
    compiled = torch.compile(model, mode="reduce-overhead")
    opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(1e-3, device="cuda"), capturable=True)
    opt_step = torch.compile(opt.step, mode="reduce-overhead")

    def train():
        for _ in range(4):
            loss = compiled(x).square().mean()
            loss.backward()
            opt_step()
            opt.zero_grad(set_to_none=True)
            loss.item()

    emit("loss-read-after-compiled-optimizer-step", raised=error_of(train))

    with torch.no_grad():  # an output fed back as the next call's input: ``x = f(x)``, and with a clone
        for clone in (False, True):
            torch._dynamo.reset()
            f = torch.compile(lambda t: torch.tanh(t) * 0.9, mode="reduce-overhead")

            def feed_back(clone=clone, f=f):
                y = torch.randn(64, 64, device="cuda")
                for _ in range(6):
                    y = f(y).clone() if clone else f(y)
                y.sum().item()

            emit("output-fed-back-cloned" if clone else "output-fed-back", raised=error_of(feed_back))


def state_rebound() -> None:
    """4. CG405: a recurrent state read and then rebound inside the captured code (``h = cell(x, self.h);
    self.h = h``) against the same state written in place (``self.h.copy_(h)``): after 3 replays, how many
    steps has the state advanced?"""
    torch.manual_seed(0)
    cell = nn.GRUCell(16, 16).cuda()
    x = torch.randn(4, 16, device="cuda")

    class Runner:
        def __init__(self, in_place: bool):
            self.h = torch.zeros(4, 16, device="cuda")
            self.in_place = in_place

        def step(self):
            h = cell(x, self.h)
            if self.in_place:
                self.h.copy_(h)
            else:
                self.h = h
            return h

    with torch.no_grad():
        steps = [torch.zeros(4, 16, device="cuda")]
        for _ in range(3):
            steps.append(cell(x, steps[-1]))
        for in_place in (False, True):
            runner = Runner(in_place)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                runner.step()
            torch.cuda.current_stream().wait_stream(side)
            runner.h = torch.zeros(4, 16, device="cuda")  # start again from zeros, as the reference does
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = runner.step()
            if in_place:
                runner.h.zero_()  # the capture ran no kernels, but be exact about the start
            for _ in range(3):
                graph.replay()
            torch.cuda.synchronize()
            advanced = next((n for n in (3, 2, 1) if torch.allclose(out, steps[n], atol=1e-5)), 0)
            emit("state-rebound" if not in_place else "state-copied-in-place", steps_advanced_after_3_replays=advanced)


if __name__ == "__main__":
    emit("machine", torch=torch.__version__, gpu=torch.cuda.get_device_name())
    for case in (part_hooks, keyword_calls, compiled_reads, state_rebound):
        try:
            case()
        except Exception as exc:  # noqa: BLE001
            emit(case.__name__, harness_error=f"{type(exc).__name__}: {exc}"[:300])
