# Forum: "mode='reduce-overhead' is SLOWER than eager for my small MLP"
# eager 0.31 ms, default 0.22 ms, reduce-overhead 0.45 ms, max-autotune 0.52 ms
# (torch 2.11, H200, 200 timed iterations after 10 warm-up calls). Someone
# suggested TORCH_LOGS=cudagraphs,graph_breaks; output was very long.
import os
import random

import torch
import torch.nn as nn

os.environ.setdefault("TORCH_LOGS", "cudagraphs,graph_breaks")
torch.backends.cuda.matmul.allow_tf32 = True


class MLP(nn.Module):
    def __init__(self, d=512, depth=6):
        super().__init__()
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(d, d), nn.LayerNorm(d), nn.GELU()]
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def f(model, x):
    y = model(x)
    if y.mean() > 0:  # HAZARD: dynamic-control-flow
        y = y - y.mean()
    print("batch std", y.std())  # HAZARD: host-code
    peak = y.abs().max().item()  # HAZARD: host-sync
    return y / peak


def timeit(fn, model, sizes, iters=200):
    with torch.no_grad():
        for _ in range(10):
            fn(model, torch.randn(64, 512, device="cuda"))
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            bs = random.choice(sizes)
            out = fn(model, torch.randn(bs, 512, device="cuda"))  # HAZARD: dynamic-shape
        end.record()
        torch.cuda.synchronize()  # CLEAN: sync after the timed loop, outside compiled code
    return start.elapsed_time(end) / iters, out.shape


model = MLP().cuda().eval()
variants = {
    "eager": f,
    "default": torch.compile(f),  # CLEAN: default mode, no CUDA graphs
    "reduce-overhead": torch.compile(f, mode="reduce-overhead"),
    "max-autotune": torch.compile(f, mode="max-autotune"),
    "no-cudagraphs": torch.compile(f, mode="max-autotune-no-cudagraphs"),  # CLEAN: same function without CUDA graphs
}
SIZES = (8, 16, 24, 32, 48, 64, 96, 128)
for name, fn in variants.items():
    ms, shape = timeit(fn, model, SIZES)
    print(f"{name:16s} {ms:.3f} ms/iter  last {tuple(shape)}")

# answer from the thread: fixed batch size and no host syncs inside
g = torch.compile(lambda m, x: m(x), mode="reduce-overhead")
ms, _ = timeit(g, model, (64,))  # CLEAN: one batch size, one recorded graph
print(f"reduce-overhead, fixed bs {ms:.3f} ms/iter")
