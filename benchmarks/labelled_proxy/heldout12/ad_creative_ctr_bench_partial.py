"""Latency benchmarks for the creative-quality scorer of the ad server.

Each case is a zero-argument callable (functools.partial or a small class)
over preallocated inputs; `bench_graph` warms it up, captures it and times
replays. `first_look` is the quick variant used when someone adds a case.
"""
import functools
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

B, EMB = 512, 256
BRAND_PALETTE = np.random.rand(32, 3).astype(np.float32)


def bench_graph(fn, iters=200):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    torch.cuda.synchronize()  # CLEAN: timing barrier outside the capture
    t0 = time.perf_counter()
    for _ in range(iters):
        g.replay()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6, g, out


def first_look(fn):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # HAZARD: api-misuse
        out = fn()
    g.replay()
    torch.cuda.synchronize()
    return out


img_enc = nn.Sequential(nn.Conv2d(3, 32, 4, 4), nn.GELU(), nn.Conv2d(32, 64, 4, 4), nn.GELU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, EMB)).cuda().eval()
txt_enc = nn.Embedding(50000, EMB).cuda().eval()
fusion = nn.Sequential(nn.Linear(2 * EMB + 4, 256), nn.ReLU(), nn.Linear(256, 1)).cuda().eval()

images = torch.rand(B, 3, 128, 128, device="cuda")
tokens = torch.randint(0, 50000, (B, 24), device="cuda")
slot_onehot = F.one_hot(torch.randint(0, 4, (B,), device="cuda"), 4).float()
pinned_palette = torch.from_numpy(BRAND_PALETTE).pin_memory()
dev_palette = torch.empty(32, 3, device="cuda")


@torch.no_grad()
def slot_fusion(images, tokens):
    slot_w = torch.tensor([1.0, 0.8, 0.6, 0.5], device="cuda")  # HAZARD: host-sync
    z = torch.cat([img_enc(images), txt_enc(tokens).mean(1), slot_onehot * slot_w], dim=-1)
    return torch.sigmoid(fusion(z))


@torch.no_grad()
def brand_consistency(images, use_pinned):
    if use_pinned:
        dev_palette.copy_(pinned_palette, non_blocking=True)  # CLEAN: H2D copy from pinned memory
        palette = dev_palette
    else:
        palette = torch.from_numpy(BRAND_PALETTE).cuda()  # HAZARD: pinned-memory
    px = images.flatten(2).transpose(1, 2)
    return torch.cdist(px, palette.expand(px.shape[0], -1, -1)).amin(-1).mean(-1)


class TemperatureSweep:
    def __init__(self):
        self.temperature = 1.0

    @torch.no_grad()
    def __call__(self):
        tau = self.temperature  # HAZARD: python-scalar
        a, t = F.normalize(img_enc(images), dim=-1), F.normalize(txt_enc(tokens).mean(1), dim=-1)
        return (a @ t.T / tau).softmax(-1).diagonal()


if __name__ == "__main__":
    cases = {
        "slot_fusion": functools.partial(slot_fusion, images, tokens),
        "brand_pinned": functools.partial(brand_consistency, images, True),
        "brand_numpy": functools.partial(brand_consistency, images, False),
    }
    for name, fn in cases.items():
        us, _, _ = bench_graph(fn)
        print(f"{name:>14}: {us:8.1f} us/replay")
    sweep = TemperatureSweep()
    _, g, align = bench_graph(sweep)
    for tau in (0.03, 0.07, 0.1, 0.2):
        sweep.temperature = tau
        g.replay()
        print(f"tau={tau}: mean alignment {align.mean().item():.3f}")
    fresh = functools.partial(brand_consistency, images[:64], True)
    print("first look:", first_look(fresh).shape)
