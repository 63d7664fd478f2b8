"""Two labels of the third held-out set that the measurements disagree on, run on a GPU (torch 2.11).

1. `graphsage_linkpred_compiled.py`: the output `h` of a compiled encoder (reduce-overhead, training)
   is passed to a second compiled function twice, then the first call's output is read. cgkit check
   reports `h` as kept past the next call (CG407); the set leaves the line unlabelled.
   And the inference form of the same question: `c = f(x); d = g(x)`, then `c` read, where only another
   compiled function ran in between (no second call of `f`).
2. `video_token_drop_compiled.py`: `print("kept tokens", x.shape)` in a `mode="max-autotune"` function.
   The set labels it clean (no graph break); cgkit check warns (CG401).

Prints one JSON line per case: what the run raised, and Dynamo's graph-break count.
"""

import json

import torch
import torch.nn.functional as F
from torch import nn


def graphsage_like():
    torch.manual_seed(0)
    encoder = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64)).cuda()
    temperature = 0.5
    score = torch.compile(lambda h, s, d: (F.normalize(h, dim=-1)[s] * F.normalize(h, dim=-1)[d]).sum(-1) / temperature,
                          mode="reduce-overhead")
    compiled = torch.compile(encoder, mode="reduce-overhead")
    opt = torch.optim.Adam(encoder.parameters(), lr=1e-3)
    x = torch.randn(512, 64, device="cuda")
    src, dst = torch.randint(0, 512, (256,), device="cuda"), torch.randint(0, 512, (256,), device="cuda")
    losses = []
    for _ in range(8):
        h = compiled(x)
        pos = score(h, src, dst)
        neg = score(h, dst, src)
        loss = F.softplus(-pos).mean() + F.softplus(neg).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss))
    return losses


def other_function_between():
    f = torch.compile(lambda x: x * 2, mode="reduce-overhead")
    g = torch.compile(lambda x: x * 3, mode="reduce-overhead")
    x = torch.randn(64, device="cuda")
    read = []
    with torch.no_grad():
        for _ in range(8):
            c = f(x)
            g(x)
            read.append(float(c.sum()))
    return read


def print_shape():
    @torch.compile(mode="max-autotune")
    def drop(tokens):
        x = tokens * 2
        print("kept tokens", x.shape)
        return x + 1

    t = torch.randn(4, 8, device="cuda")
    for _ in range(3):
        drop(t)


def main():
    from torch._dynamo.utils import counters

    for name, case in (("graphsage: compiled output passed to another compiled function twice", graphsage_like),
                       ("inference: an output read after a call of another compiled function", other_function_between),
                       ("print of a shape in a max-autotune function", print_shape)):
        counters.clear()
        torch._dynamo.reset()
        row = {"case": name, "torch": torch.__version__, "error": None}
        try:
            result = case()
            if result is not None:
                row["losses"] = [round(v, 5) for v in result]
        except Exception as error:  # the measurement: what torch raises
            row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
        row["graph_breaks"] = sum(counters["graph_break"].values())
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
