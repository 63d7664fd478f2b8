"""Does an in-place update of a *view* of an input, or one made by a helper the compiled function
hands its input to, skip CUDA graphs like a direct in-place update does? (CG510, torch 2.11 GPU)

Cases, each compiled with mode="reduce-overhead" and called 3 times:
- direct: ``x.add_(1)`` in the compiled function (the rule's own example);
- view: ``x[:, 6:9].clamp_(-3, 3)``;
- helper: ``_clip_(x)`` with the ``clamp_`` in a plain helper;
- out_of_place: ``x.clamp(-3, 3)`` (no mutation; the control).
Prints one JSON line per case: the cudagraph skips counted by Inductor and whether the caller's tensor
was changed.
"""

from __future__ import annotations

import json

import torch
from torch._dynamo.utils import counters


def _clip_(x):
    x[:, 6:9].clamp_(-3.0, 3.0)
    return x


def direct(x):
    x.add_(1)
    return x * 2


def view(x):
    x[:, 6:9].clamp_(-3.0, 3.0)
    return x * 2


def helper(x):
    return _clip_(x) * 2


def out_of_place(x):
    return x.clamp(-3.0, 3.0) * 2


def main() -> None:
    print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name()}), flush=True)
    for fn in (direct, view, helper, out_of_place):
        torch._dynamo.reset()
        counters.clear()
        compiled = torch.compile(fn, mode="reduce-overhead")
        x = torch.randn(16, 12, device="cuda") * 10
        before = x.clone()
        for _ in range(3):
            compiled(x)
        torch.cuda.synchronize()
        skips = dict(counters["inductor"]).get("cudagraph_skips", 0)
        print(json.dumps({"case": fn.__name__, "cudagraph_skips": skips,
                          "input_changed": not torch.equal(x, before)}), flush=True)


if __name__ == "__main__":
    main()
