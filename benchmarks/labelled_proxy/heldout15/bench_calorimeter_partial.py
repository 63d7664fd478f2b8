"""Latency micro-benchmarks for the endcap calorimeter energy regression.

Cases for the trigger-level energy estimate (28 sampling layers, 16x16 cells per
layer around the seed) are built with functools.partial and handed to one
capture-and-replay timing helper; the noise-cut sweep replays one graph.
"""
import functools

import numpy as np
import torch
import torch.nn as nn

N_LAYERS, CELLS, BATCH = 28, 16, 4096
LAYER_W = [1.0] * 14 + [1.35] * 8 + [2.1] * 6          # absorber thickness per layer group
SAMPLING_NP = np.linspace(0.021, 0.034, N_LAYERS).astype(np.float32)
SAMPLING_PINNED = torch.from_numpy(SAMPLING_NP).pin_memory()


class EnergyNet(nn.Module):
    def __init__(self, width=128):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(N_LAYERS, width), nn.SiLU(), nn.Linear(width, width), nn.SiLU(), nn.Linear(width, 1))

    def forward(self, e_layers):
        return torch.nn.functional.softplus(self.mlp(torch.log1p(e_layers))).squeeze(-1)


@torch.no_grad()
def bench(fn, iters=200, warmup=5, amp=True):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.autocast("cuda", dtype=torch.float16, enabled=amp):  # HAZARD: autocast-cache
        with torch.cuda.stream(s):
            for _ in range(warmup):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = fn()
    torch.cuda.synchronize()  # CLEAN: outside the capture, before timing
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        g.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters, g, out


def case_layer_weighted(hits, net):
    w = torch.tensor(LAYER_W, device=hits.device)  # HAZARD: host-sync
    return net(hits.sum((-1, -2)) * w)


def case_sampling_pageable(hits, net):
    sf = torch.from_numpy(SAMPLING_NP).cuda()  # HAZARD: pinned-memory
    return net(hits.sum((-1, -2)) / sf)


def case_sampling_pinned(hits, net):
    sf = SAMPLING_PINNED.to("cuda", non_blocking=True)  # CLEAN: copy from pinned host memory
    return net(hits.sum((-1, -2)) / sf)


class NoiseCut:
    """Zero-suppression in MIP units before the energy sum."""

    def __init__(self, thr_mip=0.5):
        self.thr_mip = thr_mip

    def __call__(self, hits, net):
        thr = self.thr_mip * 0.0525  # HAZARD: python-scalar
        kept = torch.where(hits > thr, hits, torch.zeros_like(hits))  # CLEAN: fixed-shape zero suppression
        return net(kept.sum((-1, -2)))


def main():
    net = EnergyNet().cuda().eval()
    hits = torch.rand(BATCH, N_LAYERS, CELLS, CELLS, device="cuda").pow(4) * 2.0
    cases = {
        "layer_weighted": functools.partial(case_layer_weighted, hits, net),
        "sampling_pageable": functools.partial(case_sampling_pageable, hits, net),
        "sampling_pinned": functools.partial(case_sampling_pinned, hits, net),
    }
    for name, fn in cases.items():
        ms, _, out = bench(fn)
        print(f"{name:20s} {ms * 1e3:8.1f} us   mean E {out.float().mean().item():.2f} GeV")  # CLEAN: host read after the replays
    cut = NoiseCut()
    ms, g, out = bench(functools.partial(cut, hits, net))
    for thr in (0.3, 0.5, 0.75, 1.0):
        cut.thr_mip = thr
        g.replay()
        print(f"noise cut {thr:.2f} MIP: mean E {out.float().mean().item():.2f} GeV ({ms * 1e3:.1f} us)")


if __name__ == "__main__":
    main()
