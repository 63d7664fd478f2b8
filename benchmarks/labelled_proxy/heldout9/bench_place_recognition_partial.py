"""Latency benchmarks for the loop-closure (visual place recognition) stage of a SLAM stack.

Each case (NetVLAD pooling, PCA whitening, shortlist re-ranking) is a functools.partial with
its inputs bound; `bench_graphed` warms the case up, captures it once and times replays.
`footprint` records the graph-pool size of a case for the memory budget table.
"""
import functools
import statistics

import numpy as np
import torch
import torch.nn.functional as F

K, D, DB = 64, 256, 200_000
CFG = {"temperature": 0.1}
PCA_MEAN = np.zeros(K * D, dtype=np.float32)
SHORTLIST = list(range(0, 2000, 20))


def bench_graphed(fn, warmup=3, iters=50, sweep=None):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    times = {}
    for value in (sweep or [None]):
        if value is not None:
            CFG["temperature"] = value
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            g.replay()
        end.record()
        end.synchronize()  # CLEAN: sync outside the capture, after the replays
        times[value] = start.elapsed_time(end) / iters
    return times


def footprint(fn):
    before = torch.cuda.memory_reserved()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # HAZARD: api-misuse
        fn()
    return torch.cuda.memory_reserved() - before


def netvlad(feats, centroids):
    temp = CFG["temperature"]  # HAZARD: python-scalar
    a = F.softmax((feats @ centroids.t()) / temp, dim=-1)                  # B, N, K
    resid = feats[:, :, None, :] - centroids[None, None]                   # B, N, K, D
    vlad = (a[..., None] * resid).sum(1)
    vlad = F.normalize(vlad, dim=-1).flatten(1)
    return F.normalize(vlad, dim=-1)


def whiten(desc, proj, mean_pinned, mean_dev):
    mu = torch.from_numpy(PCA_MEAN).to("cuda")  # HAZARD: pinned-memory
    mean_dev.copy_(mean_pinned, non_blocking=True)  # CLEAN: copy from pinned host memory
    return F.normalize((desc - mu - mean_dev) @ proj, dim=-1)


def rerank(query, db, k=10):
    ids = torch.tensor(SHORTLIST, device="cuda")  # HAZARD: host-sync
    sims = query @ db[ids].t()
    return torch.topk(sims, k, dim=-1)  # CLEAN: fixed-k topk, static output shape


def main():
    torch.manual_seed(0)
    feats = F.normalize(torch.randn(8, 1200, D, device="cuda"), dim=-1)
    centroids = F.normalize(torch.randn(K, D, device="cuda"), dim=-1)
    desc = torch.randn(8, K * D, device="cuda")
    proj = torch.randn(K * D, 4096, device="cuda") / 128
    mean_pinned = torch.zeros(K * D).pin_memory()
    mean_dev = torch.zeros(K * D, device="cuda")
    query = F.normalize(torch.randn(8, 4096, device="cuda"), dim=-1)
    db = F.normalize(torch.randn(DB, 4096, device="cuda"), dim=-1)
    cases = {
        "netvlad": functools.partial(netvlad, feats, centroids),
        "whiten": functools.partial(whiten, desc, proj, mean_pinned, mean_dev),
        "rerank": functools.partial(rerank, query, db),
    }
    for name, case in cases.items():
        sweep = [0.05, 0.1, 0.2] if name == "netvlad" else None
        times = bench_graphed(case, sweep=sweep)
        print(name, {k: round(v, 3) for k, v in times.items()}, "median", statistics.median(times.values()))
    wide = functools.partial(netvlad, feats.repeat(1, 2, 1), centroids)
    print("netvlad 2x features pool bytes:", footprint(wide))


if __name__ == "__main__":
    main()
