"""A compiled optimizer step whose param-group numbers change between calls (issue 19, CG404).

    python benchmarks/compiled_optimizer_lr.py [--device cuda] > rows.jsonl

`opt.step` compiled (reduce-overhead on CUDA; backend "eager" on a CPU, which shows Dynamo's guards
only), then called 12 times while the learning rate or weight decay changes as a Python float (a
param-group write, an LR scheduler), against the same with a tensor learning rate. One JSON line per
case: frames Dynamo compiled, cudagraph skips logged, and whether the parameters after 12 steps match
an eager optimizer given the same changes (the largest difference).
"""

import argparse
import copy
import json
import logging

import torch
from torch._dynamo.utils import counters

CASES = ("constant", "group_lr", "group_weight_decay", "scheduler", "tensor_lr_scheduler")
STEPS = 12


class Skips(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.reasons = []
        logging.getLogger("torch._inductor.cudagraph_utils.__cudagraphs").addHandler(self)

    def emit(self, record):
        self.reasons.append(record.getMessage().splitlines()[0])


def change(kind, opt, sched, i):
    if kind == "group_lr":
        for group in opt.param_groups:
            group["lr"] = 0.01 * (1 - i / STEPS)
    elif kind == "group_weight_decay":
        for group in opt.param_groups:
            group["weight_decay"] = 0.01 * (1 - i / STEPS)
    elif kind in ("scheduler", "tensor_lr_scheduler"):
        sched.step()


def run(kind, device, skips):
    torch._dynamo.reset()
    counters.clear()
    skips.reasons.clear()
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 64).to(device)
    twin = copy.deepcopy(model)
    batches = [torch.randn(8, 64, device=device) for _ in range(STEPS)]

    def optimizer(m):
        lr = torch.tensor(0.01, device=device) if kind == "tensor_lr_scheduler" else 0.01
        capturable = device == "cuda"
        opt = torch.optim.Adam(m.parameters(), lr=lr, capturable=capturable)
        return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))

    opt, sched = optimizer(model)
    ref_opt, ref_sched = optimizer(twin)
    options = {"mode": "reduce-overhead"} if device == "cuda" else {"backend": "eager"}
    step = torch.compile(opt.step, **options)
    for i, x in enumerate(batches):
        if device == "cuda":
            torch.compiler.cudagraph_mark_step_begin()
        model(x).pow(2).mean().backward()
        step()
        opt.zero_grad(set_to_none=True)
        change(kind, opt, sched, i)
        twin(x).pow(2).mean().backward()
        ref_opt.step()
        ref_opt.zero_grad(set_to_none=True)
        change(kind, ref_opt, ref_sched, i)
    diff = max(float((a - b).abs().max()) for a, b in zip(model.parameters(), twin.parameters(), strict=True))
    return {"case": kind, "device": device, "torch": torch.__version__, "steps": STEPS,
            "frames_compiled": counters["stats"]["unique_graphs"], "cudagraph_skips": sorted(set(skips.reasons)),
            "max_param_diff_vs_eager": diff}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    skips = Skips()
    for kind in CASES:
        print(json.dumps(run(kind, args.device, skips)), flush=True)


if __name__ == "__main__":
    main()
