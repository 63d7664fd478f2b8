"""Micro-benchmark harness: times eager vs CUDA-graph replay of small op chains."""
import statistics
import time

import torch


def bench_graph(fn, *args, iters=200, warmup=5):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            fn(*args)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn(*args)
    torch.cuda.synchronize()  # CLEAN: sync after capture, outside the region
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()  # CLEAN: host timing around replay
        g.replay()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def rmsnorm_chain(x, w, done_evt):
    t0 = time.perf_counter()  # HAZARD: host-code
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    torch.cuda.synchronize()  # HAZARD: host-sync
    if not done_evt.query():  # HAZARD: host-sync
        pass
    y = y + x
    elapsed = time.perf_counter() - t0  # HAZARD: host-code
    return y, elapsed


def softmax_chain(x):
    m = x.amax(-1, keepdim=True)
    e = (x - m).exp()
    return e / e.sum(-1, keepdim=True)


if __name__ == "__main__":
    x = torch.randn(4096, 4096, device="cuda")
    w = torch.ones(4096, device="cuda")
    evt = torch.cuda.Event()
    evt.record()
    for name, fn, args in (("rmsnorm", rmsnorm_chain, (x, w, evt)), ("softmax", softmax_chain, (x,))):
        print(f"{name}: {bench_graph(fn, *args) * 1e6:.1f} us")
