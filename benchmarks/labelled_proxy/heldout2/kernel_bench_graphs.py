"""Micro-benchmark harness: times small ops eagerly and as CUDA graph replays."""
import time

import torch
import torch.nn.functional as F

TIMINGS = {}
PEAK = {}


def layernorm_case(x, w, b):
    y = F.layer_norm(x, x.shape[-1:], w, b)
    torch.cuda.synchronize()  # HAZARD: host-sync
    return y


def softmax_case(x):
    TIMINGS["softmax_host_start"] = time.perf_counter()  # HAZARD: host-code
    return torch.softmax(x, dim=-1)


def matmul_case(a, b):
    torch.cuda.nvtx.range_push("matmul_case")  # CLEAN: NVTX marker is a host annotation, harmless during capture
    c = a @ b
    torch.cuda.nvtx.range_pop()
    PEAK["matmul"] = torch.cuda.max_memory_allocated()  # HAZARD: memory
    return c


def h2d_pageable_case(dst, src):
    return dst.copy_(src, non_blocking=True)  # HAZARD: pinned-memory


def h2d_pinned_case(dst, src_pinned):
    return dst.copy_(src_pinned, non_blocking=True)  # CLEAN: source is pinned and allocated before capture


AUX = torch.cuda.Stream()


def overlap_case(a, b):
    AUX.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(AUX):  # HAZARD: stream
        c = a @ b
    return torch.relu(a) + 1, c


def bench_graphed(fn, args, warmup=3, iters=200):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            fn(*args)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn(*args)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        g.replay()
    end.record()
    torch.cuda.synchronize()  # CLEAN: sync after the replays, outside the region
    return start.elapsed_time(end) / iters, out


def sweep_softmax(shapes):
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    results = {}
    for shape in shapes:
        x = torch.randn(*shape, device="cuda")
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            torch.softmax(x, -1)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):  # HAZARD: api-misuse
            y = torch.softmax(x, -1)
        g.replay()
        results[shape] = y.sum().item()  # CLEAN: read after replay
    return results


def main():
    x = torch.randn(8192, 4096, device="cuda", dtype=torch.float16)
    w, b = torch.ones(4096, device="cuda", dtype=torch.float16), torch.zeros(4096, device="cuda", dtype=torch.float16)
    for name, fn, args in [
        ("layernorm", layernorm_case, (x, w, b)),
        ("softmax", softmax_case, (x,)),
        ("matmul", matmul_case, (x, x.t().contiguous())),
        ("h2d_pageable", h2d_pageable_case, (torch.empty_like(x), torch.empty(x.shape, dtype=x.dtype))),
        ("h2d_pinned", h2d_pinned_case, (torch.empty_like(x), torch.empty(x.shape, dtype=x.dtype).pin_memory())),
        ("overlap", overlap_case, (x, x.t().contiguous())),
    ]:
        ms, _ = bench_graphed(fn, args)
        print(f"{name:>10s}: {ms * 1e3:8.1f} us/iter")
    print(sweep_softmax([(1024, 1024), (2048, 1024), (4096, 4096)]))
