"""Latency micro-benchmarks for the packet-header classifier of a GPU-offloaded packet filter.

Each case is a ``functools.partial`` over a batch of 4096 parsed headers; ``bench`` captures
it once and times graph replays with CUDA events (the filter runs at line rate only if a
batch replays in under 20 us). Some cases sweep a parameter between replays through a setter.
"""
import functools
import time

import numpy as np
import torch
import torch.nn as nn

BATCH, HDR = 4096, 64
ETH_P_IP, ETH_P_IPV6 = 0x0800, 0x86DD


def bench(case, iters=200, setters=()):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # CLEAN: warm-up on a forked and joined side stream
        for _ in range(3):
            case()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        case()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    results = {}
    for setter in setters or (lambda: None,):
        setter()
        start.record()
        for _ in range(iters):
            g.replay()
        end.record()
        torch.cuda.synchronize()  # CLEAN: after the replays, outside the capture
        results[getattr(setter, "__name__", "base")] = start.elapsed_time(end) * 1e3 / iters
    return results


class HeaderNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(256, 16)
        self.mlp = nn.Sequential(nn.Linear(HDR * 16, 128), nn.ReLU(), nn.Linear(128, 8))

    def forward(self, hdr):
        return self.mlp(self.emb(hdr).flatten(1))


class Cases:
    def __init__(self, dev="cuda"):
        self.dev = dev
        self.net = HeaderNet().to(dev).eval()
        self.hdr = torch.randint(0, 256, (BATCH, HDR), device=dev)
        self.rules_np = np.random.randint(0, 2, (8, 8)).astype(np.float32)  # CLEAN: host RNG at set-up, outside the capture
        self.rules_pinned = torch.from_numpy(self.rules_np).pin_memory()
        self.rules_dev = torch.empty(8, 8, device=dev)
        self.drop_threshold = 0.9

    @torch.no_grad()
    def plain(self):
        return self.net(self.hdr).softmax(-1)

    @torch.no_grad()
    def ethertype_gate(self):
        et = self.hdr[:, 12] * 256 + self.hdr[:, 13]
        allowed = torch.tensor([ETH_P_IP, ETH_P_IPV6], device=self.dev)  # HAZARD: host-sync
        ok = (et[:, None] == allowed).any(-1)
        return torch.where(ok[:, None], self.net(self.hdr), torch.full((BATCH, 8), -1e4, device=self.dev))

    @torch.no_grad()
    def with_rules_pageable(self):
        rules = torch.from_numpy(self.rules_np).cuda()  # HAZARD: pinned-memory
        return self.net(self.hdr).softmax(-1) @ rules

    @torch.no_grad()
    def with_rules_pinned(self):
        self.rules_dev.copy_(self.rules_pinned, non_blocking=True)  # CLEAN: copy from pinned host memory is recorded
        return self.net(self.hdr).softmax(-1) @ self.rules_dev

    @torch.no_grad()
    def drop_list(self):
        p = self.net(self.hdr).softmax(-1)[:, 0]
        return (p > 0.9).nonzero()  # HAZARD: dynamic-shape

    @torch.no_grad()
    def drop_mask(self):
        t = self.drop_threshold  # HAZARD: python-scalar
        p = self.net(self.hdr).softmax(-1)[:, 0]
        return torch.where(p > t, 1, 0).to(torch.uint8)  # CLEAN: fixed-shape drop mask


def main():
    t0 = time.perf_counter()
    c = Cases()
    cases = {name: functools.partial(getattr(Cases, name), c)
             for name in ("plain", "ethertype_gate", "with_rules_pageable", "with_rules_pinned", "drop_list")}
    report = {name: bench(fn) for name, fn in cases.items()}

    def set_threshold(v):
        def setter():
            c.drop_threshold = v
        setter.__name__ = f"thr={v}"
        return setter

    report["drop_mask"] = bench(functools.partial(Cases.drop_mask, c), setters=[set_threshold(v) for v in (0.5, 0.7, 0.9)])
    for name, r in report.items():
        print(f"{name:22s} " + "  ".join(f"{k}: {v:6.2f} us" for k, v in r.items()))
    print(f"total bench time {time.perf_counter() - t0:.1f}s")
