"""Mixture-of-experts block; each layer kind is compiled once and kept in a dict by name."""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

logger = logging.getLogger("moe")


class Expert(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)))


class DroplessMoE(nn.Module):
    def __init__(self, dim=1024, hidden=2816, num_experts=8, top_k=2):
        super().__init__()
        self.router = nn.Linear(dim, num_experts, bias=False)
        self.experts = nn.ModuleList(Expert(dim, hidden) for _ in range(num_experts))
        self.num_experts, self.top_k = num_experts, top_k

    def forward(self, x):
        T = x.shape[0]
        logger.debug("dropless routing for %d tokens", T)  # HAZARD: host-code
        weights, expert_idx = torch.topk(self.router(x).softmax(-1), self.top_k, dim=-1)  # CLEAN: fixed-size top-k on device
        counts = F.one_hot(expert_idx.flatten(), self.num_experts).sum(0)
        tokens_per_expert = counts.tolist()  # HAZARD: host-sync
        out = torch.zeros_like(x)
        for e, n in enumerate(tokens_per_expert):
            if n == 0:
                continue
            tok, slot = (expert_idx == e).nonzero(as_tuple=True)  # HAZARD: dynamic-shape
            y = self.experts[e](x[tok]) * weights[tok, slot, None]
            out.index_add_(0, tok, y)
        return out.view(T, -1)


class CapacityMoE(DroplessMoE):
    """Fixed-capacity variant: every expert sees exactly `capacity` slots."""

    def forward(self, x):
        T, D = x.shape
        capacity = int(1.25 * T * self.top_k / self.num_experts)  # CLEAN: derived from the static token count only
        weights, expert_idx = torch.topk(self.router(x).softmax(-1), self.top_k, dim=-1)
        onehot = F.one_hot(expert_idx, self.num_experts).sum(1)
        pos = torch.cumsum(onehot, 0) * onehot - 1
        keep = (pos >= 0) & (pos < capacity)
        if not keep.any():  # HAZARD: dynamic-control-flow
            return x
        slot = torch.where(keep, pos, torch.full_like(pos, capacity))
        buf = x.new_zeros(self.num_experts, capacity + 1, D)
        buf[torch.arange(self.num_experts, device=x.device)[None], slot] = x[:, None, :].expand(-1, self.num_experts, -1)
        h = torch.stack([exp(buf[i, :capacity]) for i, exp in enumerate(self.experts)])
        gathered = torch.cat([h, h.new_zeros(self.num_experts, 1, D)], 1)[torch.arange(self.num_experts, device=x.device)[None], slot]
        gate = torch.zeros_like(onehot, dtype=x.dtype).scatter(1, expert_idx, weights)
        return (gathered * gate[..., None]).sum(1)  # CLEAN: combine with device-side gates, no host read


def build_layers(dim=1024):
    layers = {
        "dropless": DroplessMoE(dim).cuda(),
        "capacity": CapacityMoE(dim).cuda(),
        "dense_ffn": Expert(dim, 4 * dim).cuda(),
    }
    compiled = {name: torch.compile(m, mode="max-autotune") for name, m in layers.items()}
    compiled["debug_dropless"] = torch.compile(layers["dropless"], mode="max-autotune-no-cudagraphs")
    return compiled


def run(compiled, x, kind="capacity"):
    return compiled[kind](x)
