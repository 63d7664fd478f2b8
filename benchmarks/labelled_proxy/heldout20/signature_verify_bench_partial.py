"""Back-office fraud: latency benchmarks for offline signature verification (cheque and
direct-debit mandate forms).  Each candidate is a zero-argument case handed to the platform's
graph benchmark helper; results go to the model-review board's dashboard.
"""
import functools
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def bench_graph(case, iters=200, warmup=3, amp=True):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.autocast("cuda", dtype=torch.float16, enabled=amp):  # HAZARD: autocast-cache
        with torch.cuda.stream(s):
            for _ in range(warmup):
                case()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = case()
    torch.cuda.synchronize()  # CLEAN: sync outside the graph, before timing
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        g.replay()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return g, out, statistics.median(times) * 1e3


def first_look(case):
    """Quick footprint check for a brand-new case: graph-pool growth of one capture."""
    before = torch.cuda.memory_reserved()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # HAZARD: api-misuse
        out = case()
    return out, torch.cuda.memory_reserved() - before


class SigEncoder(nn.Module):
    def __init__(self, dim=256):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 32, 5, stride=2, padding=2), nn.ReLU(),
                                 nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, dim))

    def forward(self, x):
        return F.normalize(self.net(x), dim=-1)


@torch.no_grad()
def pair_case(enc, ref, qry):
    return (enc(ref) * enc(qry)).sum(-1)


@torch.no_grad()
def staged_case(enc, ref_host, ref_dev, qry):
    ref_dev.copy_(ref_host, non_blocking=True)  # CLEAN: H2D copy from pinned memory, recorded in the graph
    return (enc(ref_dev) * enc(qry)).sum(-1)


@torch.no_grad()
def eer_case(enc, ref, qry):
    sim = (enc(ref) * enc(qry)).sum(-1)
    scores = sim.float().cpu().numpy()  # HAZARD: host-sync
    return sim, scores.mean()


class MarginSweep:
    """Accept decision at a cosine margin; the board sweeps the margin on one captured graph."""

    def __init__(self, enc, ref, qry):
        self.enc, self.ref, self.qry = enc, ref, qry
        self.margin = 0.5

    @torch.no_grad()
    def __call__(self):
        m = self.margin  # HAZARD: python-scalar
        sim = (self.enc(self.ref) * self.enc(self.qry)).sum(-1)
        return (sim > m).float()


def main(batch=64, hw=(128, 256)):
    enc = SigEncoder().cuda().eval()
    ref = torch.randn(batch, 1, *hw, device="cuda")
    qry = torch.randn(batch, 1, *hw, device="cuda")
    ref_host = torch.randn(batch, 1, *hw).pin_memory()
    ref_dev = torch.empty_like(ref)
    report = {}
    cases = {"pair": functools.partial(pair_case, enc, ref, qry),
             "staged": functools.partial(staged_case, enc, ref_host, ref_dev, qry),
             "eer": functools.partial(eer_case, enc, ref, qry)}
    for name, case in cases.items():
        report[name] = bench_graph(case)[2]
    sweep = MarginSweep(enc, ref, qry)
    g, out, _ = bench_graph(sweep)
    for m in (0.3, 0.4, 0.5, 0.6, 0.7):
        sweep.margin = m
        g.replay()
        report[f"accept@{m}"] = out.mean().item()  # CLEAN: host read after the replay
    wide = SigEncoder(dim=512).cuda().eval()
    _, report["pool_growth_wide"] = first_look(functools.partial(pair_case, wide, ref, qry))
    return report
