# Stack Overflow: "torch.compile(backend='cudagraphs') is not faster and the
# TORCH_LOGS output says it skipped / re-recorded. Inference on 1-D sensor
# windows." The asker's code (the default-backend build is their control).
import os

import numpy as np
import torch
import torch._dynamo
import torch.nn as nn

os.environ.setdefault("TORCH_LOGS", "cudagraphs")
torch._dynamo.config.cache_size_limit = 32

net = nn.Sequential(nn.Conv1d(6, 64, 9, padding=4), nn.ReLU(), nn.Conv1d(64, 64, 9, padding=4),
                    nn.ReLU(), nn.Conv1d(64, 3, 1)).cuda().eval()


def normalize_(x):
    x.sub_(x.mean(-1, keepdim=True))  # HAZARD: static-address
    return x


def normalize(x):
    return x - x.mean(-1, keepdim=True)  # CLEAN: out-of-place twin


def score(x, lengths):
    L = int(lengths.max())  # HAZARD: host-sync
    x = x[..., :L]
    gain = np.random.uniform(0.9, 1.1)  # HAZARD: host-code
    return net(x * gain).mean(-1)


cnorm_ = torch.compile(normalize_, backend="cudagraphs")
cnorm = torch.compile(normalize, backend="cudagraphs")
cscore = torch.compile(score, backend="cudagraphs")
score_ref = torch.compile(score)  # default (inductor) backend, no CUDA graphs


def batches(n=30):
    for _ in range(n):
        b = np.random.randint(1, 65)  # CLEAN: NumPy RNG in the data generator, outside compiled code
        lengths = torch.randint(200, 1001, (b,), device="cuda")
        yield torch.randn(b, 6, 1000, device="cuda"), lengths


with torch.no_grad():
    for x, lengths in batches():
        x = cnorm_(x)
        out = cscore(x, lengths)  # HAZARD: dynamic-shape
        ref = score_ref(x, lengths)  # CLEAN: default backend, no CUDA graph to re-record
        print(x.shape[0], out.shape, (out - ref).abs().max().item())

    fixed = torch.randn(64, 6, 1000, device="cuda")
    full = torch.full((64,), 1000, device="cuda")
    for _ in range(5):
        y = cscore(cnorm(fixed).clone(), full)  # CLEAN: one padded shape for every call
        print("fixed:", y.abs().mean().item())
