"""Decode step compiled with reduce-overhead; two ways of holding the KV cache."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, dim=1024, heads=16, max_len=4096, bsz=4):
        super().__init__()
        self.h, self.hd = heads, dim // heads
        self.wqkv = nn.Linear(dim, 3 * dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.register_buffer("k_buf", torch.zeros(bsz, heads, max_len, self.hd))
        self.register_buffer("v_buf", torch.zeros(bsz, heads, max_len, self.hd))

    def forward(self, x, pos, mask):
        b, t, _ = x.shape
        q, k, v = self.wqkv(x).view(b, t, 3, self.h, self.hd).permute(2, 0, 3, 1, 4)
        self.k_buf.index_copy_(2, pos, k)  # CLEAN: mutating a registered buffer is allowed by cudagraph trees
        self.v_buf.index_copy_(2, pos, v)
        y = F.scaled_dot_product_attention(q, self.k_buf, self.v_buf, attn_mask=mask)
        return self.wo(y.transpose(1, 2).reshape(b, t, -1))


@torch.compile(mode="reduce-overhead", fullgraph=True)
def decode_with_external_cache(layer, x, pos, mask, k_cache, v_cache):
    b, t, _ = x.shape
    q, k, v = layer.wqkv(x).view(b, t, 3, layer.h, layer.hd).permute(2, 0, 3, 1, 4)
    k_cache.index_copy_(2, pos, k)  # HAZARD: static-address
    v_cache[:, :, pos] = v  # HAZARD: static-address
    y = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask)
    return layer.wo(y.transpose(1, 2).reshape(b, t, -1))


@torch.compile(mode="reduce-overhead", fullgraph=True)
def decode_with_buffer_cache(layer, x, pos, mask):
    return layer(x, pos, mask)


def run(steps=128, bsz=4, max_len=4096):
    layer = Attention(bsz=bsz, max_len=max_len).cuda().eval()
    k_cache = torch.zeros(bsz, 16, max_len, 64, device="cuda")
    v_cache = torch.zeros_like(k_cache)
    pos = torch.zeros(1, dtype=torch.long, device="cuda")
    x = torch.randn(bsz, 1, 1024, device="cuda")
    causal = torch.ones(1, max_len, dtype=torch.bool, device="cuda").tril()
    with torch.no_grad():
        for _ in range(steps):
            mask = causal.index_select(0, torch.zeros(1, dtype=torch.long, device="cuda"))
            y1 = decode_with_external_cache(layer, x, pos, mask, k_cache, v_cache).clone()  # CLEAN: output cloned
            y2 = decode_with_buffer_cache(layer, x, pos, mask).clone()
            x = (y1 + y2) * 0.5
            pos.add_(1)
    return x
