"""Latency benchmarks for a photo app's aesthetic scorer (NIMA-style).

Each case is a zero-argument callable (mostly functools.partial) handed to
`bench_graph`, which warms it up on a side stream, captures it once and times
replays. `amp=True` runs warm-up and capture under fp16 autocast, like the
production path.
"""
import functools
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

BUCKETS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]


class NIMA(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(128, len(BUCKETS))

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def bench_graph(fn, iters=200, amp=False):
    with torch.autocast("cuda", dtype=torch.float16, enabled=amp):  # HAZARD: autocast-cache
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = fn()
    torch.cuda.synchronize()  # CLEAN: synchronize outside the capture, before timing
    t0 = time.perf_counter()  # CLEAN: host timer around the replays, not inside the graph
    for _ in range(iters):
        g.replay()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e3, out, g


def case_mean_score(model, imgs):
    probs = torch.softmax(model(imgs), -1)
    w = torch.tensor(BUCKETS, dtype=torch.float32, device=imgs.device)  # HAZARD: host-sync
    return (probs * w).sum(-1)


def case_exif_prior(model, imgs, exif_np):
    exif = torch.from_numpy(exif_np).cuda()  # HAZARD: pinned-memory
    return model(imgs) + exif[:, : len(BUCKETS)]


def case_exif_pinned(model, imgs, exif_pinned, exif_dev):
    exif_dev.copy_(exif_pinned, non_blocking=True)  # CLEAN: H2D copy from pinned host memory
    return model(imgs) + exif_dev[:, : len(BUCKETS)]


class CropSweep:
    """Re-scores the same photos at several crop scales (smart-crop preview)."""

    def __init__(self, model, imgs):
        self.model, self.imgs, self.scale = model, imgs, 1.0

    def __call__(self):
        size = round(224 * self.scale)  # HAZARD: python-scalar
        crop = F.interpolate(self.imgs, size=(size, size), mode="bilinear", align_corners=False)
        return self.model(crop)


def sweep_crops(model, imgs, scales=(0.75, 0.875, 1.125)):
    case = CropSweep(model, imgs)
    _, out, g = bench_graph(case, amp=True)
    results = {}
    for scale in scales:
        case.scale = scale
        g.replay()
        results[scale] = out.float().softmax(-1).argmax(-1).cpu()
    return results


if __name__ == "__main__":
    model = NIMA().cuda().eval()
    imgs = torch.randn(32, 3, 224, 224, device="cuda")
    exif = np.random.rand(32, 16).astype(np.float32)
    cases = {
        "mean_score": functools.partial(case_mean_score, model, imgs),
        "exif_pageable": functools.partial(case_exif_prior, model, imgs, exif),
        "exif_pinned": functools.partial(case_exif_pinned, model, imgs, torch.from_numpy(exif).pin_memory(),
                                         torch.empty(32, 16, device="cuda")),
    }
    with torch.no_grad():
        for name, case in cases.items():
            ms, _, _ = bench_graph(case, amp=True)
            print(f"{name:>14s}: {ms:.3f} ms/replay")
        print(sweep_crops(model, imgs))
