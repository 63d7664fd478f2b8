"""Context-parallel (CP=4) long-context inference for a 128k-token legal-document model:
each rank keeps two zigzag chunks of the sequence, K/V are all-gathered eagerly, and the
local attention runs as a compiled function (max-autotune) followed by a compiled projection."""
import logging

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("cp_attn")


def zigzag_index(seq, cp, rank, device):
    chunk = seq // (2 * cp)
    first = torch.arange(rank * chunk, (rank + 1) * chunk, device=device)
    second = torch.arange((2 * cp - 1 - rank) * chunk, (2 * cp - rank) * chunk, device=device)
    return torch.cat([first, second])


class CPAttention(nn.Module):
    def __init__(self, d, heads, group, seq, softcap=50.0, block=1024):
        super().__init__()
        self.group, self.cp, self.rank = group, dist.get_world_size(group), dist.get_rank(group)
        self.h, self.d, self.softcap, self.block = heads, d, softcap, block
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.register_buffer("q_pos", zigzag_index(seq, self.cp, self.rank, "cuda"))
        order = torch.cat([zigzag_index(seq, self.cp, r, "cuda") for r in range(self.cp)])
        self.register_buffer("inv_order", torch.argsort(order))
        self.attn = torch.compile(self._attn_impl, mode="max-autotune")
        self.proj = torch.compile(self.o, mode="max-autotune")

    def _attn_impl(self, q, k, v):
        log.info("cp attention q=%s k=%s", tuple(q.shape), tuple(k.shape))  # HAZARD: host-code
        k_pos = torch.arange(k.shape[2], device=k.device)
        kb_first = k_pos[:: self.block]
        live = (kb_first[None, :] <= self.q_pos.max()).squeeze(0).nonzero().squeeze(1)  # HAZARD: dynamic-shape
        s = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
        cap = self.softcap  # HAZARD: python-scalar
        s = cap * torch.tanh(s / cap)
        causal = self.q_pos[:, None] >= k_pos[None, :]
        s = torch.where(causal, s, torch.finfo(s.dtype).min)  # CLEAN: causal mask by torch.where, fixed shape
        return torch.softmax(s.float(), -1).to(v.dtype) @ v, live

    def _gather_kv(self, t):
        out = t.new_empty((self.cp,) + tuple(t.shape))
        dist.all_gather_into_tensor(out, t.contiguous(), group=self.group)
        b, h, n, dh = t.shape
        full = out.permute(1, 2, 0, 3, 4).reshape(b, h, self.cp * n, dh)
        return full.index_select(2, self.inv_order)  # CLEAN: zigzag undone with a CUDA index, no host round trip

    @torch.no_grad()
    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.h, self.d // self.h).permute(2, 0, 3, 1, 4)
        a, live = self.attn(q, self._gather_kv(k), self._gather_kv(v))
        y = self.proj(a.transpose(1, 2).reshape(b, n, self.d).clone())  # CLEAN: attention output cloned before the next compiled call
        energy = a.float().pow(2).mean()  # HAZARD: static-address
        return y.clone(), energy


class LegalDocEncoder:
    def __init__(self, layers):
        self.layers = layers

    def encode(self, x_local, variant):
        for layer in self.layers:
            layer.softcap = {"base": 50.0, "long": 30.0}[variant]  # per-request model variant
        energies = []
        for layer in self.layers:
            y, e = layer(x_local)
            x_local = x_local + y
            energies.append(e)
        return x_local, torch.stack(energies)
