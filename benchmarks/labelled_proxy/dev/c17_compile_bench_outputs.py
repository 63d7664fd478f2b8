"""Benchmark a reduce-overhead compiled attention block, collecting outputs for checks."""
import time

import torch
import torch.nn.functional as F


@torch.compile(mode="reduce-overhead", fullgraph=False)
def attn_block(q, k, v, w_o):
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.cuda.synchronize()  # HAZARD: host-sync
    return y.transpose(1, 2).flatten(2) @ w_o


def run(bsz=8, heads=16, seq=1024, hd=64, iters=50):
    q, k, v = (torch.randn(bsz, heads, seq, hd, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    w_o = torch.randn(heads * hd, heads * hd, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        attn_block(q, k, v, w_o)
    torch.cuda.synchronize()  # CLEAN: outside the compiled function
    t0 = time.perf_counter()
    outs = [attn_block(q, k, v, w_o) for _ in range(iters)]  # HAZARD: static-address
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / iters
    ref = attn_block(q, k, v, w_o).clone()  # CLEAN: cloned, survives the next replay
    torch.compiler.cudagraph_mark_step_begin()
    last = attn_block(q, k, v, w_o)
    assert torch.allclose(ref, last, atol=1e-2)  # CLEAN: comparison in eager code, not in a captured region
    for o in outs:
        assert torch.allclose(o, ref, atol=1e-2)
    print(f"{dt * 1e3:.3f} ms/iter")
