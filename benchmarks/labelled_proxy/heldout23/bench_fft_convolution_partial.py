"""Micro-benchmarks: direct vs FFT long convolution for seismic/acoustic filters.

HPC-style harness: every case is a zero-argument callable (functools.partial) that
`bench()` warms up, captures into a CUDA graph and replays N times.
"""
import functools
import time
import numpy as np
import torch
import torch.nn.functional as F

dev = "cuda"
KERNEL_TAPS = [0.0625, 0.25, 0.375, 0.25, 0.0625]
GAIN = 1.0
RESULTS = {}


def bench(name, fn, iters=200, amp=False):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    if amp:
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            with torch.cuda.graph(g):
                out = fn()
    else:
        with torch.cuda.graph(g):
            out = fn()
    torch.cuda.synchronize()  # CLEAN: after the capture, outside the region
    t0 = time.perf_counter()
    for _ in range(iters):
        g.replay()
    torch.cuda.synchronize()
    RESULTS[name] = (time.perf_counter() - t0) / iters * 1e6
    return g, out


def bench_cold(name, fn, iters=200):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # HAZARD: api-misuse
        fn()
    t0 = time.perf_counter()
    for _ in range(iters):
        g.replay()
    torch.cuda.synchronize()
    RESULTS[name] = (time.perf_counter() - t0) / iters * 1e6


def direct_conv(x, w):
    return F.conv1d(x, w, padding=w.shape[-1] // 2)


def fft_conv(x, w):
    n = x.shape[-1] + w.shape[-1] - 1
    nfft = 1 << (n - 1).bit_length()
    X = torch.fft.rfft(x, n=nfft)  # CLEAN: rfft/irfft are capturable
    W = torch.fft.rfft(w, n=nfft)
    return torch.fft.irfft(X * W, n=nfft)[..., :x.shape[-1]]


def smoothing_case(x):
    w = torch.tensor(KERNEL_TAPS, device=dev).view(1, 1, -1)  # HAZARD: host-sync
    return direct_conv(x, w)


def gain_case(x, w):
    gain = GAIN  # HAZARD: python-scalar
    return fft_conv(x, w) * gain


x_short = torch.randn(64, 1, 4096, device=dev)
x_long = torch.randn(8, 1, 1 << 20, device=dev)
w_short = torch.randn(1, 1, 31, device=dev)
w_long = torch.randn(1, 1, 8191, device=dev)
conv_long = torch.nn.Conv1d(1, 1, 8191, padding=4095, bias=False).to(dev)
W_SMOOTH = torch.as_tensor(np.array(KERNEL_TAPS, np.float32)).view(1, 1, -1).to(dev)  # CLEAN: uploaded once at import

CASES = {
    "direct_31": functools.partial(direct_conv, x_short, w_short),
    "fft_8191": functools.partial(fft_conv, x_long, w_long),
    "direct_8191_fp16": functools.partial(conv_long, x_long),
    "smooth_5": functools.partial(smoothing_case, x_short),
    "smooth_5_static": functools.partial(direct_conv, x_short, W_SMOOTH),
}

if __name__ == "__main__":
    for name, case in CASES.items():
        bench(name, case, amp=name.endswith("fp16"))
    bench_cold("fft_31_cold", functools.partial(fft_conv, x_short, w_short))
    g, out = bench("gain_fft", functools.partial(gain_case, x_long, w_long))
    for GAIN in (0.5, 2.0, 4.0):
        g.replay()
        print(GAIN, out.abs().max().item())
    for k, v in sorted(RESULTS.items(), key=lambda kv: kv[1]):
        print(f"{k:>20s} {v:10.1f} us")
