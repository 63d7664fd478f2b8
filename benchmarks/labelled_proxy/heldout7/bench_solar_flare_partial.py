"""Micro-benchmarks for the SDO solar-flare forecaster (>= M-class within 24 h).

Each case is a functools.partial handed to a graph benchmark helper; the report lists
replay latency per case, the graph memory footprint and a sweep of the input gain.
"""
import functools

import numpy as np
import torch
import torch.nn as nn

AIA_CHANNELS = (94, 131, 171, 193, 211, 304, 335)
AIA_CHANNEL_WEIGHTS = [1.6, 1.3, 0.4, 0.5, 0.7, 0.6, 1.4]      # inverse median brightness
CFG = {"gain": 1.0}


class FlareNet(nn.Module):
    def __init__(self, c_in=len(AIA_CHANNELS) + 1):
        super().__init__()
        chans = [c_in, 32, 64, 128, 256]
        self.body = nn.Sequential(*[nn.Sequential(nn.Conv2d(a, b, 3, stride=2, padding=1), nn.BatchNorm2d(b), nn.GELU())
                                    for a, b in zip(chans[:-1], chans[1:])])
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 1))

    def forward(self, x):
        return torch.sigmoid(self.head(self.body(x))).squeeze(-1)


def bench_graphed(fn, warmup=5, iters=200):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # CLEAN: warmed up on a side stream first
        out = fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        g.replay()
    end.record()
    torch.cuda.synchronize()  # CLEAN: outside the capture, after the timed replays
    return start.elapsed_time(end) / iters, g, out


def graph_footprint(fn):
    before = torch.cuda.memory_reserved()
    with torch.cuda.graph(torch.cuda.CUDAGraph()):  # HAZARD: api-misuse
        fn()
    return (torch.cuda.memory_reserved() - before) / 2**20


def case_aia_stack(model, aia, bz):
    w = torch.tensor(AIA_CHANNEL_WEIGHTS, device=aia.device)  # HAZARD: host-sync
    x = torch.cat([torch.log1p(aia.clamp_min(0)) * w.view(1, -1, 1, 1), bz / 3000.0], 1)
    return model(x)


def case_magnetogram_upload(model, aia, bz_np):
    bz = torch.from_numpy(bz_np).cuda()  # HAZARD: pinned-memory
    return model(torch.cat([aia, bz / 3000.0], 1))


def case_pinned_upload(model, aia, bz_pinned, bz_dev):
    bz_dev.copy_(bz_pinned, non_blocking=True)  # CLEAN: pinned, persistent host buffer
    return model(torch.cat([aia, bz_dev / 3000.0], 1))


def case_full_disk(model, x):
    torch.cuda.empty_cache()  # HAZARD: memory
    return model(x)


def case_gain(model, x):
    gain = CFG["gain"]  # HAZARD: python-scalar
    return model(x * gain)


def case_masked_limb(model, x, disk_mask):
    return model(torch.where(disk_mask, x, torch.zeros_like(x)))  # CLEAN: off-limb pixels zeroed with where


@torch.no_grad()
def main(batch=32, res=256, device="cuda"):
    model = FlareNet().eval().to(device)
    aia = torch.rand(batch, len(AIA_CHANNELS), res, res, device=device) * 1e3
    bz = torch.randn(batch, 1, res, res, device=device) * 500
    bz_np, bz_pinned, bz_dev = bz.cpu().numpy(), bz.cpu().pin_memory(), torch.empty_like(bz)
    x = torch.cat([aia / 1e3, bz / 3000.0], 1)
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, res, device=device), torch.linspace(-1, 1, res, device=device), indexing="ij")
    disk = (xx ** 2 + yy ** 2 < 0.95).view(1, 1, res, res)
    cases = {
        "aia_stack": functools.partial(case_aia_stack, model, aia, bz),
        "magnetogram_upload": functools.partial(case_magnetogram_upload, model, aia, bz_np),
        "pinned_upload": functools.partial(case_pinned_upload, model, aia, bz_pinned, bz_dev),
        "full_disk": functools.partial(case_full_disk, model, x),
        "masked_limb": functools.partial(case_masked_limb, model, x, disk),
    }
    print(f"graph footprint of aia_stack: {graph_footprint(cases['aia_stack']):.1f} MiB")
    for name, fn in cases.items():
        ms, _, _ = bench_graphed(fn)
        print(f"{name:>20s}: {ms:.3f} ms/replay")
    _, g, out = bench_graphed(functools.partial(case_gain, model, x))
    for gain in (0.5, 0.8, 1.0, 1.25, 2.0):
        CFG["gain"] = gain
        g.replay()
        print(f"gain {gain:4.2f}: mean P(flare) = {out.mean().item():.4f}")

