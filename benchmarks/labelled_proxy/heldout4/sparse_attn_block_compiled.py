"""Long-document classifier with routed block-sparse attention (BigBird/Routing style).

Each query block attends to the top-k key blocks by pooled similarity.  The
density of the layout is annealed during training.  Compile options are passed
through from the launcher config as keyword arguments.
"""
import logging

import torch
import torch.nn as nn

logger = logging.getLogger("longdoc")


class BlockSparseSelfAttention(nn.Module):
    def __init__(self, dim=512, heads=8, block=64, density=0.25, causal=False):
        super().__init__()
        self.h, self.d, self.block = heads, dim // heads, block
        self.density, self.causal = density, causal
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.last_density = 0.0

    def forward(self, x):
        B, L, D = x.shape
        nb = L // self.block  # CLEAN: block count comes from shape metadata
        q, k, v = self.qkv(x).view(B, L, 3, self.h, self.d).permute(2, 0, 3, 1, 4)
        qb = q.reshape(B, self.h, nb, self.block, self.d).mean(3)
        kb = k.reshape(B, self.h, nb, self.block, self.d).mean(3)
        block_scores = qb @ kb.transpose(-1, -2)
        if self.causal:  # CLEAN: set at construction and never changed
            tri = torch.ones(nb, nb, dtype=torch.bool, device=x.device).triu(1)
            block_scores = block_scores.masked_fill(tri, float("-inf"))
        k_keep = max(1, int(self.density * nb))  # HAZARD: python-scalar
        top = block_scores.topk(k_keep, -1).indices
        layout = torch.zeros_like(block_scores, dtype=torch.bool).scatter_(-1, top, True)
        n_active = int(layout.sum())  # HAZARD: host-sync
        self.last_density = n_active / layout.numel()
        logger.debug("block-sparse attention L=%d blocks=%d", L, nb)  # HAZARD: host-code
        mask = layout.repeat_interleave(self.block, -2).repeat_interleave(self.block, -1)
        attn = (q @ k.transpose(-1, -2)) / self.d ** 0.5
        out = attn.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        return self.proj(out.transpose(1, 2).reshape(B, L, D))


class LongDocClassifier(nn.Module):
    def __init__(self, vocab=50000, dim=512, depth=6, n_classes=20, max_len=4096):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(1, max_len, dim))
        self.attn = nn.ModuleList([BlockSparseSelfAttention(dim) for _ in range(depth)])
        self.ffn = nn.ModuleList([nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 4 * dim), nn.GELU(),
                                                nn.Linear(4 * dim, dim)) for _ in range(depth)])
        self.norms = nn.ModuleList([nn.LayerNorm(dim) for _ in range(depth)])
        self.head = nn.Linear(dim, n_classes)

    def forward(self, ids):
        h = self.emb(ids) + self.pos[:, : ids.shape[1]]
        for attn, ffn, norm in zip(self.attn, self.ffn, self.norms):
            h = h + attn(norm(h))
            h = h + ffn(h)
        return self.head(h.mean(1))


class LongDocRunner:
    def __init__(self, model: LongDocClassifier, buckets=(1024, 2048, 4096), **compile_opts):
        self.model, self.buckets = model.cuda(), buckets
        opts = {"mode": "max-autotune", **compile_opts}
        self.fast = torch.compile(model, **opts)
        self.flex = torch.compile(model, mode="max-autotune-no-cudagraphs", dynamic=True)

    def anneal(self, step, total, start=0.5, end=0.1):
        for m in self.model.attn:
            m.density = start + (end - start) * min(1.0, step / total)

    @torch.no_grad()
    def predict_bucketed(self, ids):
        L = next(b for b in self.buckets if b >= ids.shape[1])
        padded = torch.nn.functional.pad(ids, (0, L - ids.shape[1]))
        return self.fast(padded).argmax(-1)

    @torch.no_grad()
    def predict_any(self, ids):
        return self.flex(ids).argmax(-1)  # CLEAN: no-cudagraphs compile with dynamic shapes

    @torch.no_grad()
    def score_stream(self, docs):
        preds = []
        for d in docs:
            d = d[: (d.shape[0] // 64) * 64].cuda()
            preds.append(self.fast(d[None]).argmax(-1).item())  # HAZARD: dynamic-shape
        return preds
