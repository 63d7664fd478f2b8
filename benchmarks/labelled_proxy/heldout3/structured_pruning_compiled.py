"""Iterative structured pruning (attention heads + FFN neurons) of a BERT-style encoder.

Masks live in registered buffers; the masked model is compiled with
options={"triton.cudagraphs": True} once and reused across pruning rounds.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("prune")


class PrunableLayer(nn.Module):
    def __init__(self, d=768, heads=12, ffn=3072):
        super().__init__()
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, ffn), nn.Linear(ffn, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.heads = heads
        self.register_buffer("head_mask", torch.ones(heads))
        self.register_buffer("ffn_mask", torch.ones(ffn))

    def forward(self, x, pad):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=~pad[:, None, None, :])
        a = a * self.head_mask[None, :, None, None]
        x = self.ln1(x + self.o(a.transpose(1, 2).reshape(b, t, d)))
        h = F.gelu(self.fc1(x)) * self.ffn_mask
        return self.ln2(x + self.fc2(h))


class PrunableEncoder(nn.Module):
    def __init__(self, vocab=30522, layers=12, d=768):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(PrunableLayer(d) for _ in range(layers))
        self.cls = nn.Linear(d, 2)

    def forward(self, ids, pad):
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x, pad)
        density = float(self.layers[0].ffn_mask.mean())  # HAZARD: host-sync
        log.info("forward at ffn density %.2f", density)  # HAZARD: host-code
        return self.cls(x[:, 0])


def head_importance(layer, x, pad):
    imp = layer.o.weight.view(layer.o.weight.shape[0], layer.heads, -1).norm(dim=(0, 2))
    log.debug("max head importance %.3f", imp.max().item())  # CLEAN: compiled with the default mode (no CUDA graphs)
    return imp


class Pruner:
    def __init__(self, model, head_step=1, ffn_fraction=0.1):
        self.model = model.cuda()
        self.compiled = torch.compile(model, options={"triton.cudagraphs": True})
        self.importance = torch.compile(head_importance)
        self.head_step, self.ffn_fraction = head_step, ffn_fraction

    @torch.no_grad()
    def prune_round(self, calib_ids, calib_pad):
        for layer in self.model.layers:
            imp = self.importance(layer, None, None)
            alive = int(layer.head_mask.sum())  # CLEAN: host read in the eager pruning loop, outside the compiled model
            keep_heads = torch.zeros_like(layer.head_mask)
            keep_heads[imp.topk(max(alive - self.head_step, 1)).indices] = 1.0
            layer.head_mask = keep_heads * layer.head_mask  # HAZARD: static-address
            ffn_imp = layer.fc2.weight.abs().sum(0) * layer.ffn_mask
            n_keep = int(ffn_imp.numel() * (1 - self.ffn_fraction))
            keep_ffn = torch.zeros_like(layer.ffn_mask).index_fill_(0, ffn_imp.topk(n_keep).indices, 1.0)
            layer.ffn_mask.copy_(keep_ffn * layer.ffn_mask)  # CLEAN: in-place update keeps the buffer address
        return self.compiled(calib_ids, calib_pad)

    def finetune(self, loader, opt, steps):
        for _, (ids, pad, y) in zip(range(steps), loader):
            loss = F.cross_entropy(self.compiled(ids, pad), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
