"""sd-webui "System Info"-style extension: a benchmark tab that times the installed
upscalers eagerly and as CUDA graphs. Cases are functools.partial objects handed to
`bench_graph`.
"""
import functools
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

BENCH = {"sharpness": 0.5}
SIDE = torch.cuda.Stream()


def bench_graph(fn, iters=50, amp=False):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # CLEAN: forked warm-up, joined below
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    if amp:
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            with torch.cuda.graph(g):
                fn()
    else:
        with torch.cuda.graph(g):  # CLEAN: warmed up, side-stream capture, no autocast
            fn()
    torch.cuda.synchronize()  # CLEAN: outside the capture
    t0 = time.perf_counter()
    for _ in range(iters):
        g.replay()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e3, g


class RRDBLite(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 32, 3, padding=1)
        self.c2 = nn.Conv2d(32, 12, 3, padding=1)

    def forward(self, x):
        return F.pixel_shuffle(self.c2(F.relu(self.c1(x))), 2)


def case_plain(model, x):
    return model(x)


def case_sharpen(model, x):
    y = model(x)
    k = BENCH["sharpness"]  # HAZARD: python-scalar
    return y + k * (y - F.avg_pool2d(y, 3, 1, 1))


def case_lanczos_kernel(x):
    taps = np.sinc(np.linspace(-2, 2, 9)).astype(np.float32)
    w = torch.from_numpy(taps / taps.sum()).cuda().view(1, 1, 1, 9).expand(3, 1, 1, 9)  # HAZARD: pinned-memory
    return F.conv2d(x, w, padding=(0, 4), groups=3)


def case_two_streams(model, x):
    with torch.cuda.stream(SIDE):  # HAZARD: stream
        half = model(x[:, :, : x.shape[2] // 2])
    return torch.cat([model(x[:, :, x.shape[2] // 2:]), half], 2)


def case_kernel_preloaded(x, w):
    return F.conv2d(x, w, padding=(0, 4), groups=3)  # CLEAN: kernel uploaded before the capture


def run_all():
    model = RRDBLite().cuda().eval()
    x = torch.rand(1, 3, 256, 256, device="cuda")
    taps = np.sinc(np.linspace(-2, 2, 9)).astype(np.float32)
    w = torch.from_numpy(taps / taps.sum()).cuda().view(1, 1, 1, 9).expand(3, 1, 1, 9).contiguous()  # CLEAN: eager upload at setup
    cases = {
        "plain": functools.partial(case_plain, model, x),
        "sharpen": functools.partial(case_sharpen, model, x),
        "lanczos": functools.partial(case_lanczos_kernel, x),
        "two_streams": functools.partial(case_two_streams, model, x),
        "lanczos_pre": functools.partial(case_kernel_preloaded, x, w),
    }
    rows = []
    with torch.no_grad():
        for name, fn in cases.items():
            ms, g = bench_graph(fn, amp=(name == "plain"))
            if name == "sharpen":
                for s in (0.0, 0.5, 1.0):
                    BENCH["sharpness"] = s
                    g.replay()
            rows.append((name, round(ms, 3)))
    return rows
