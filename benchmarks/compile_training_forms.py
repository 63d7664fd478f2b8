"""Forms of a torch.compile(mode="reduce-overhead") training step, timed side by side (GPU).

    python benchmarks/compile_training_forms.py --workload demo [--forms a,b] [--profile FORM]

Issue 18 asks the `compile` training recipe to reach half of `manual`'s whole-step speedup. This
script finds which form of the step gets there; the recipe keeps the fastest, and the others are
documented with their figures. Each form runs in its own process (they set process-wide Dynamo and
Inductor switches) from the same initial weights and batch:

  eager_opt        compiled model (forward and backward as cudagraph trees), eager Adam (foreach)
  fused_opt        compiled model, eager Adam(fused=True): the update is one multi-tensor kernel launch
  compiled_opt     compiled model and compiled optimizer.step (the recipe's default until 2026-12-01)
  compiled_opt_nn_guards_off
                   compiled_opt with torch.compiler.skip_guard_on_all_nn_modules_unsafe on the model
  compiled_opt_trees_off
                   compiled_opt with inductor's cudagraph trees off (one plain CUDA graph per graph)
  whole_step       forward, loss, backward and optimizer.step in one compiled function, with
                   compiled autograd tracing the backward
  func_grad        forward and backward as one compiled function of torch.func.grad_and_value
                   (no autograd engine at run time; gradients are the graph's outputs), the
                   gradients set as .grad, then the compiled optimizer.step

For reference, the same process times the eager step and `manual`'s whole step in one
torch.cuda.graph. Every form's losses over its first steps are compared with eager's. One JSON
line per form: ms per step (median of 5 rounds of CUDA-event timing), speedup over eager, the
share of manual's speedup, and the losses' largest difference. --profile FORM prints the 25 most
expensive Python functions (cProfile, by own time) of 200 steady-state steps of that form.
"""

import argparse
import cProfile
import json
import pstats
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from demo_timing import time_ms  # noqa: E402  (one CUDA-event timer for the small experiments)

FORMS = ("eager_opt", "fused_opt", "compiled_opt", "compiled_opt_nn_guards_off", "compiled_opt_trees_off",
         "whole_step", "func_grad")
LOSS_STEPS = 6


def build(workload: str):
    import torch
    import workloads

    torch.manual_seed(0)
    if workload == "demo":
        model = workloads._mlp(256, 32)
        inputs = (torch.randn(8, 256),)
    else:
        model = getattr(workloads, f"{workload}_model")()
        inputs = getattr(workloads, f"{workload}_inputs")()
    return model.cuda(), tuple(t.cuda() for t in inputs)


def make_optimizer(model, fused=False):
    import torch

    lr = torch.tensor(1e-3, device="cuda")
    if fused:
        return torch.optim.Adam(model.parameters(), lr=lr, fused=True)
    return torch.optim.Adam(model.parameters(), lr=lr, capturable=True)


def loss_of(output):
    return output.float().pow(2).mean()


def form_step(form: str, model, inputs):
    """The training step of one form, as a function of no arguments returning the loss."""
    import torch

    if form == "compiled_opt_trees_off":
        torch._inductor.config.triton.cudagraph_trees = False
    if form == "whole_step":
        torch._dynamo.config.compiled_autograd = True
    # mode="reduce-overhead" is options={"triton.cudagraphs": True}; torch takes one or the other.
    settings = {"mode": "reduce-overhead"}
    if form == "compiled_opt_nn_guards_off":
        settings = {"options": {"triton.cudagraphs": True,
                                "guard_filter_fn": torch.compiler.skip_guard_on_all_nn_modules_unsafe}}
    optimizer = make_optimizer(model, fused=form == "fused_opt")

    if form == "whole_step":
        def whole(*batch):
            loss = loss_of(model(*batch))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return loss

        compiled_whole = torch.compile(whole, mode="reduce-overhead")

        def step():
            torch.compiler.cudagraph_mark_step_begin()
            return compiled_whole(*inputs).detach().clone()

        return step

    if form == "func_grad":
        return func_grad_step(model, inputs, optimizer)

    compiled = torch.compile(model, **settings)
    optimizer_step = optimizer.step
    if form.startswith("compiled_opt"):
        optimizer_step = torch.compile(optimizer.step, mode="reduce-overhead")

    def step():
        torch.compiler.cudagraph_mark_step_begin()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(compiled(*inputs))
        loss.backward()
        optimizer_step()
        return loss.detach().clone()

    return step


def func_grad_step(model, inputs, optimizer):
    """Gradients from one compiled torch.func.grad_and_value graph, then the compiled optimizer step."""
    import torch
    from torch.func import functional_call, grad_and_value

    parameters = dict(model.named_parameters())

    def loss_with(weights, *batch):
        return loss_of(functional_call(model, weights, batch))

    @torch.no_grad()  # grad_and_value differentiates inside; nothing differentiates its results
    def gradients_of(*batch):
        return grad_and_value(loss_with)(parameters, *batch)

    gradients_and_loss = torch.compile(gradients_of, mode="reduce-overhead")
    optimizer_step = torch.compile(optimizer.step, mode="reduce-overhead")

    def step():
        torch.compiler.cudagraph_mark_step_begin()
        gradients, loss = gradients_and_loss(*inputs)
        for name, parameter in parameters.items():
            parameter.grad = gradients[name]
        optimizer_step()
        return loss.detach().clone()

    return step


def reference_steps(model, inputs):
    """The eager step and manual's whole step in one graph, on copies of the same weights.

    The replay function keeps the graph's model and optimizer alive: a graph does not own the
    tensors it reads and writes, and replaying over freed ones is an illegal memory access."""
    import copy

    import torch

    eager_model = copy.deepcopy(model)
    eager_optimizer = make_optimizer(eager_model)

    def eager():
        eager_optimizer.zero_grad(set_to_none=False)
        loss = loss_of(eager_model(*inputs))
        loss.backward()
        eager_optimizer.step()
        return loss

    graph_model = copy.deepcopy(model)
    graph_optimizer = make_optimizer(graph_model)

    def body():
        loss = loss_of(graph_model(*inputs))
        loss.backward()
        graph_optimizer.step()
        return loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            graph_optimizer.zero_grad(set_to_none=True)
            body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    graph_optimizer.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        body()

    def manual():  # holds the graph's model and optimizer: their tensors are what the graph reads and writes
        graph.replay()
        return graph_model, graph_optimizer

    return eager, manual


def run_form(args) -> dict:
    import copy

    import torch

    model, inputs = build(args.workload)
    initial = copy.deepcopy(model)
    eager, manual = reference_steps(initial, inputs)
    eager_losses = [float(eager()) for _ in range(LOSS_STEPS)]
    step = form_step(args.form, copy.deepcopy(initial), inputs)
    row = {"workload": args.workload, "form": args.form, "torch": torch.__version__}
    try:
        losses = [float(step()) for _ in range(LOSS_STEPS)]
    except Exception as error:  # a form torch cannot run: recorded, not fatal
        row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
        return row
    row["loss_max_diff"] = max(abs(a - b) for a, b in zip(losses, eager_losses, strict=True))
    row["eager_ms"] = time_ms(eager, iters=100)
    row["manual_ms"] = time_ms(manual, iters=100)
    row["form_ms"] = time_ms(step, iters=100)
    row["speedup"] = row["eager_ms"] / row["form_ms"]
    row["manual_speedup"] = row["eager_ms"] / row["manual_ms"]
    row["share_of_manual"] = row["speedup"] / row["manual_speedup"]
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(200):
            step()
        torch.cuda.synchronize()
        profiler.disable()
        stats = pstats.Stats(profiler, stream=sys.stderr)
        stats.sort_stats("tottime").print_stats(25)
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="demo")
    parser.add_argument("--forms", default=",".join(FORMS))
    parser.add_argument("--profile", default="", help="a form to profile with cProfile (its output on stderr)")
    parser.add_argument("--form", help=argparse.SUPPRESS)  # one form, in this process
    args = parser.parse_args()
    if args.form:
        args.profile = args.profile == args.form
        print(json.dumps(run_form(args)), flush=True)
        return 0
    status = 0
    for form in args.forms.split(","):
        command = [sys.executable, __file__, "--workload", args.workload, "--form", form,
                   "--profile", args.profile]
        status |= subprocess.run(command, timeout=900).returncode != 0
    return status


if __name__ == "__main__":
    sys.exit(main())
