"""Micro-benchmarks of attention implementations for a Llama-3-8B-shaped layer.

Each case (eager, sdpa, sliding window, ALiBi, paged KV, block-sparse) is bound
with functools.partial and handed to `bench_graph`, which warms it up, captures
it into a CUDA graph and times replays with CUDA events. Graphs are cached by
case name so sweeps can re-use them.
"""
import functools
import math

import numpy as np
import torch
import torch.nn.functional as F

B, H, KVH, S, D = 4, 32, 8, 4096, 128
dev = "cuda"
SWEEP = {"softcap": 50.0}
_GRAPHS = {}


def bench_graph(name, fn, iters=50, warmup=3):
    if name not in _GRAPHS:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(warmup):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = fn()
        _GRAPHS[name] = (g, out)
    g, out = _GRAPHS[name]
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()  # CLEAN: events recorded around replays, outside the capture
    for _ in range(iters):
        g.replay()
    end.record()
    torch.cuda.synchronize()  # CLEAN: synchronize after the replays, outside the capture
    return start.elapsed_time(end) / iters, out


def eager_softcap(q, k, v):
    k, v = k.repeat_interleave(H // KVH, 1), v.repeat_interleave(H // KVH, 1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(D)
    cap = SWEEP["softcap"]  # HAZARD: python-scalar
    scores = cap * torch.tanh(scores / cap)
    causal = torch.ones(S, S, dtype=torch.bool, device=dev).tril()
    return scores.masked_fill(~causal, -float("inf")).softmax(-1) @ v  # CLEAN: masked_fill keeps the shape


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def alibi(q, k, v, slopes_np):
    slopes = torch.from_numpy(slopes_np).cuda()  # HAZARD: pinned-memory
    pos = torch.arange(S, device=dev)
    bias = slopes[:, None, None] * (pos[None, None, :] - pos[None, :, None]).clamp(max=0)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype), enable_gqa=True)


def paged(q, k_pages, v_pages, block_table, page=256):
    k = k_pages.index_select(0, block_table).view(B, S, KVH, D).transpose(1, 2)  # CLEAN: page gather with a CUDA block table
    v = v_pages.index_select(0, block_table).view(B, S, KVH, D).transpose(1, 2)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def paged_host_table(q, k_pages, v_pages, table_list):
    kv = torch.stack([k_pages, v_pages])[:, table_list]  # HAZARD: host-sync
    k, v = (t.view(B, S, KVH, D).transpose(1, 2) for t in kv)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def block_sparse(q, k, v, block_mask, blk=128):
    active = block_mask.nonzero()  # HAZARD: dynamic-shape
    out = torch.zeros_like(q)
    qb, kb = q.view(B, H, S // blk, blk, D), k.repeat_interleave(H // KVH, 1).view(B, H, S // blk, blk, D)
    out.view(B, H, S // blk, blk, D)[:, :, active[:, 0]] += (qb[:, :, active[:, 0]] * kb[:, :, active[:, 1]]).sum(-1, keepdim=True)
    return out


def main():
    q = torch.randn(B, H, S, D, device=dev, dtype=torch.bfloat16)
    k, v = (torch.randn(B, KVH, S, D, device=dev, dtype=torch.bfloat16) for _ in range(2))
    n_pages = B * S // 256
    k_pages = torch.randn(n_pages * 256, KVH, D, device=dev, dtype=torch.bfloat16)
    v_pages = torch.randn_like(k_pages)
    perm = torch.randperm(n_pages * 256, device=dev)
    slopes = (2.0 ** (-8.0 * np.arange(1, H + 1) / H)).astype(np.float32)
    cases = {
        "eager_softcap": functools.partial(eager_softcap, q, k, v),
        "sdpa": functools.partial(sdpa, q, k, v),
        "alibi": functools.partial(alibi, q, k, v, slopes),
        "paged": functools.partial(paged, q, k_pages, v_pages, perm),
        "paged_host": functools.partial(paged_host_table, q, k_pages, v_pages, perm.tolist()),  # CLEAN: table read to the host once, before any capture
        "block_sparse": functools.partial(block_sparse, q, k, v, torch.rand(S // 128, S // 128, device=dev) > 0.8),
    }
    for name, fn in cases.items():
        ms, _ = bench_graph(name, fn)
        print(f"{name:14s} {ms:8.3f} ms")
    for cap in (20.0, 30.0, 50.0):
        SWEEP["softcap"] = cap
        ms, _ = bench_graph("eager_softcap", cases["eager_softcap"])
        print(f"softcap={cap:4.0f} {ms:8.3f} ms")


if __name__ == "__main__":
    main()
