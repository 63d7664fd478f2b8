"""A CUDA-graph-compiled function fed a tensor whose shape changes between calls (issue 19, CG206).

    python benchmarks/compiled_shapes.py > rows.jsonl        (a CUDA GPU)

`torch.compile(f, mode="reduce-overhead")` called 20 times with `x[:, :t]` for t = 1..20 (a growing
prefix, as in a decode loop that feeds the whole prefix), against 20 calls with one fixed shape. One
JSON line per case: frames Dynamo compiled, the dynamic-shape warnings Inductor logged (they count the
distinct sizes recorded), and the mean time of the last 10 calls.
"""

import json
import logging
import time

import torch
from torch._dynamo.utils import counters


class Logged(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []
        for name in ("torch._inductor.cudagraph_utils", "torch._inductor.cudagraph_utils.__cudagraphs",
                     "torch._inductor.cudagraph_trees"):
            logger = logging.getLogger(name)
            logger.addHandler(self)
            logger.setLevel(logging.DEBUG)

    def emit(self, record):
        self.lines.append(record.getMessage().splitlines()[0][:200])


def body(x, w):
    return torch.tanh(x @ w).sum(-1)


def run(case: str, logged: Logged) -> dict:
    torch._dynamo.reset()
    counters.clear()
    logged.lines.clear()
    w = torch.randn(64, 64, device="cuda")
    x = torch.randn(8, 64, 64, device="cuda").transpose(1, 2).contiguous()  # (8, 64, 64)
    f = torch.compile(body, mode="reduce-overhead")
    times = []
    with torch.no_grad():
        for t in range(1, 21):
            arg = x[:, :t] if case == "growing_prefix" else x[:, :20]
            torch.cuda.synchronize()
            start = time.perf_counter()
            f(arg, w)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - start) * 1e3)
    return {"case": case, "torch": torch.__version__, "calls": 20, "frames_compiled": counters["stats"]["unique_graphs"],
            "last10_ms": round(sum(times[10:]) / 10, 4),
            "dynamic_shape_warnings": sorted({line for line in logged.lines if "distinct" in line})}


def main():
    logged = Logged()
    for case in ("fixed_shape", "growing_prefix"):
        print(json.dumps(run(case, logged)), flush=True)


if __name__ == "__main__":
    main()
