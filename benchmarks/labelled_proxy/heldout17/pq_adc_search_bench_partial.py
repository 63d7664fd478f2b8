"""Latency benchmarks for product-quantization (PQ) asymmetric-distance search kernels.

Each case is a zero-argument callable (functools.partial) that a helper warms up, captures
into a CUDA graph and replays to time. Used to pick M / nprobe for the ANN service.
"""
import functools

import numpy as np
import torch

CFG = {"lut_scale": 1.0}
PROBE_ORDER = [0, 1, 2, 3, 5, 8, 13, 21]


def bench_graph(fn, warmup=5, iters=200):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # CLEAN: warmed up on a side stream first
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        g.replay()
    end.record()
    torch.cuda.synchronize()  # CLEAN: sync after the replays, outside capture
    return g, start.elapsed_time(end) / iters


def first_look(fn):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # HAZARD: api-misuse
        fn()
    g.replay()
    torch.cuda.synchronize()


def adc_scores(queries, codebooks, codes):
    # queries [Q, M, dsub], codebooks [M, 256, dsub], codes [N, M] (int64)
    lut = torch.einsum("qmd,mkd->qmk", queries, codebooks) * CFG["lut_scale"]  # HAZARD: python-scalar
    scores = torch.zeros(queries.shape[0], codes.shape[0], device=queries.device)
    for m in range(codebooks.shape[0]):
        scores += lut[:, m].index_select(1, codes[:, m])  # CLEAN: index_select with a CUDA index
    return torch.topk(scores, 100, largest=False)


def adc_host_codebooks(queries, codebooks_np, codes):
    codebooks = torch.from_numpy(codebooks_np).cuda()  # HAZARD: pinned-memory
    return adc_scores(queries, codebooks, codes)


def adc_staged_codebooks(queries, cb_pinned, cb_dev, codes):
    cb_dev.copy_(cb_pinned, non_blocking=True)  # CLEAN: source is pinned host memory
    return adc_scores(queries, cb_dev, codes)


def ivf_adc(queries, centroids, list_codes, codebooks):
    # list_codes [n_lists, L, M]; probe a fixed set of inverted lists
    probe = torch.tensor(PROBE_ORDER, device="cuda")  # HAZARD: host-sync
    codes = list_codes.index_select(0, probe).flatten(0, 1)
    coarse = queries.flatten(1) @ centroids.t()
    return adc_scores(queries, codebooks, codes), coarse.argmax(1)


def sweep_lut_scale(case, scales=(0.5, 1.0, 2.0)):
    g, _ = bench_graph(case)
    results = {}
    for s in scales:
        CFG["lut_scale"] = s
        g.replay()
        torch.cuda.synchronize()
        results[s] = True
    return results


def main(Q=256, N=1_000_000, M=16, dsub=8):
    dev = "cuda"
    q = torch.randn(Q, M, dsub, device=dev)
    cb_np = np.random.randn(M, 256, dsub).astype(np.float32)
    cb = torch.from_numpy(cb_np).to(dev)
    cb_pinned = torch.from_numpy(cb_np).pin_memory()
    codes = torch.randint(0, 256, (N, M), device=dev)
    list_codes = torch.randint(0, 256, (64, N // 64, M), device=dev)
    centroids = torch.randn(64, M * dsub, device=dev)
    cases = {
        "adc": functools.partial(adc_scores, q, cb, codes),
        "adc_host": functools.partial(adc_host_codebooks, q, cb_np, codes),
        "adc_staged": functools.partial(adc_staged_codebooks, q, cb_pinned, torch.empty_like(cb), codes),
        "ivf": functools.partial(ivf_adc, q, centroids, list_codes, cb),
    }
    for name, case in cases.items():
        _, ms = bench_graph(case)
        print(f"{name:12s} {ms:.3f} ms")
    first_look(functools.partial(adc_scores, q[:32], cb, codes[:100_000]))
    sweep_lut_scale(cases["adc"])


if __name__ == "__main__":
    main()
