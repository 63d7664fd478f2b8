"""Micro-benchmarks of sparse-attention variants, timed as CUDA graph replays.

Each case is a zero-argument callable (a functools.partial) handed to
`bench_graph`, which warms it up, captures it and times the replays.
"""
import functools
from dataclasses import dataclass

import torch


@dataclass
class AttnCfg:
    window: int = 128
    temperature: float = 1.0
    threshold: float = 0.02
    dilations: tuple = (1, 2, 4)


def capture(fn, warmup=3):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


def time_replays(g, iters=50):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        g.replay()
    end.record()
    torch.cuda.synchronize()  # CLEAN: synchronizes after the replays, outside any capture
    return start.elapsed_time(end) / iters


def bench_graph(fn, iters=50):
    return time_replays(capture(fn), iters)


def sliding_window_attn(q, k, v, cfg):
    L = q.shape[-2]
    i = torch.arange(L, device=q.device)
    band = (i[:, None] - i[None, :]).abs() <= cfg.window  # CLEAN: every window size gets its own capture
    s = (q @ k.transpose(-1, -2)).masked_fill(~band, float("-inf"))
    return torch.softmax(s, -1) @ v


def dilated_attn(q, k, v, cfg):
    offs = torch.tensor(cfg.dilations, device=q.device)  # HAZARD: host-sync
    i = torch.arange(q.shape[-2], device=q.device)
    keep = ((i[:, None] - i[None, :]).remainder(offs.view(-1, 1, 1)) == 0).any(0)
    return torch.softmax((q @ k.transpose(-1, -2)).masked_fill(~keep, float("-inf")), -1) @ v


def block_sparse_attn(q, k, v, layout_cpu, block=64):
    layout = layout_cpu.cuda()  # HAZARD: pinned-memory
    mask = layout.repeat_interleave(block, 0, output_size=q.shape[-2]).repeat_interleave(block, 1, output_size=k.shape[-2])  # CLEAN: integer repeats with output_size, no device read
    return torch.softmax((q @ k.transpose(-1, -2)).masked_fill(~mask, float("-inf")), -1) @ v


def threshold_attn(q, k, v, cfg):
    p = torch.softmax(q @ k.transpose(-1, -2), -1)
    idx = (p > cfg.threshold).nonzero(as_tuple=True)  # HAZARD: dynamic-shape
    sparse = torch.zeros_like(p).index_put_(idx, p[idx])
    return sparse @ v


def softmax_temp_attn(q, k, v, cfg):
    s = q @ k.transpose(-1, -2) / cfg.temperature  # HAZARD: python-scalar
    return torch.softmax(s, -1) @ v


def run_suite(B=4, H=16, L=2048, D=64):
    q, k, v = (torch.randn(B, H, L, D, device="cuda", dtype=torch.float16) for _ in range(3))
    cfg, results = AttnCfg(), {}
    for window in (64, 128, 256):
        cfg.window = window
        results[f"swa_{window}"] = bench_graph(functools.partial(sliding_window_attn, q, k, v, cfg))
    results["dilated"] = bench_graph(functools.partial(dilated_attn, q, k, v, cfg))
    layout = torch.rand(L // 64, L // 64) < 0.25
    results["block_sparse"] = bench_graph(functools.partial(block_sparse_attn, q, k, v, layout))
    results["threshold"] = bench_graph(functools.partial(threshold_attn, q, k, v, cfg))
    g = capture(functools.partial(softmax_temp_attn, q, k, v, cfg))
    for temp in (0.5, 1.0, 2.0):
        cfg.temperature = temp
        results[f"temp_{temp}"] = time_replays(g)
    return results


if __name__ == "__main__":
    for name, ms in run_suite().items():
        print(f"{name:>16s} {ms:8.3f} ms")
