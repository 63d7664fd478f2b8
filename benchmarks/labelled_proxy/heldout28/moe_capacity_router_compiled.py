"""Router + dispatch planning of an expert-parallel MoE for a speech-recognition encoder
(64 experts over 8 ranks). Two planners: a dropless one that derives all-to-all split
sizes from token counts, and a capacity-padded one with fixed shapes. Both compiled with
mode="max-autotune"; the all-to-all itself runs eagerly."""
import logging

import torch
import torch.distributed as dist
import torch.nn as nn

log = logging.getLogger("moe_router")


class Router(nn.Module):
    def __init__(self, d, n_experts, ep, capacity_factor=1.25, aux_coef=1e-2):
        super().__init__()
        self.gate = nn.Linear(d, n_experts, bias=False)
        self.E, self.ep, self.cf, self.aux_coef = n_experts, ep, capacity_factor, aux_coef
        self.plan_dropless = torch.compile(self._plan_dropless, mode="max-autotune")
        self.plan_padded = torch.compile(self._plan_padded, mode="max-autotune")

    def _probs(self, x):
        p = torch.softmax(self.gate(x).float(), -1)
        w, e = p.topk(1, dim=-1)  # CLEAN: fixed-k topk
        return p, w.squeeze(-1), e.squeeze(-1)

    def _plan_dropless(self, x):
        p, w, e = self._probs(x)
        counts = torch.zeros(self.E, dtype=torch.long, device=x.device).scatter_add_(0, e, torch.ones_like(e))
        if (counts > 4 * x.shape[0] // self.E).any():  # HAZARD: dynamic-control-flow
            log.warning("hot expert in this batch")  # HAZARD: host-code
        splits = counts.view(self.ep, -1).sum(1).tolist()  # HAZARD: host-sync
        order = torch.argsort(e, stable=True)
        first_expert_tokens = x[e == 0]  # HAZARD: dynamic-shape
        aux = self.E * (p.mean(0) * counts.float() / x.shape[0]).sum()
        return x[order], w[order], splits, aux, first_expert_tokens.shape[0]

    def _plan_padded(self, x):
        p, w, e = self._probs(x)
        cap = int(self.cf * x.shape[0] / self.E)  # CLEAN: capacity from static shapes, no tensor read
        onehot = torch.zeros(x.shape[0], self.E, device=x.device).scatter_(1, e[:, None], 1.0)
        pos = (onehot.cumsum(0) * onehot).sum(1).long() - 1
        keep = pos < cap
        slot = torch.where(keep, e * cap + pos, torch.full_like(pos, self.E * cap))  # CLEAN: dropped tokens sent to a dummy slot with torch.where
        buf = x.new_zeros(self.E * cap + 1, x.shape[1])
        buf.index_copy_(0, slot, x)
        aux = self.E * (p.mean(0) * onehot.mean(0)).sum()
        return buf[:-1].view(self.E, cap, -1), slot, w * keep, aux * self.aux_coef


def dispatch_padded(router, x, group):
    buf, slot, w, aux = router.plan_padded(x)
    send = buf.clone().contiguous()  # CLEAN: graph output cloned before the eager collective
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    return recv, slot.clone(), w.clone(), aux.clone()


def dispatch_dropless(router, x, group):
    xs, w, splits, aux, _ = router.plan_dropless(x)
    counts_in = torch.tensor(splits, device=x.device)
    counts_out = torch.empty_like(counts_in)
    dist.all_to_all_single(counts_out, counts_in, group=group)
    recv_splits = counts_out.tolist()
    recv = xs.new_empty(sum(recv_splits), xs.shape[1])
    dist.all_to_all_single(recv, xs.clone(), recv_splits, splits, group=group)
    return recv, w.clone(), aux.clone()
