"""Expert-parallel, dropless top-2 MoE FFN of a multilingual MT decoder, trained with its
forward + backward captured for a fixed token budget (tokens are all-to-all'ed to the
rank that owns the expert)."""
import logging

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("ep_moe")


class EPMoE(nn.Module):
    def __init__(self, d, n_experts, ep_group, jitter=0.01):
        super().__init__()
        self.group, self.n_experts, self.jitter = ep_group, n_experts, jitter
        self.ep = dist.get_world_size(ep_group)
        self.local = n_experts // self.ep
        self.first = dist.get_rank(ep_group) * self.local
        self.router = nn.Linear(d, n_experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(self.local, d, 4 * d) * 0.02)
        self.w2 = nn.Parameter(torch.randn(self.local, 4 * d, d) * 0.02)
        self.jitter_gen = torch.Generator(device="cuda")
        self.jitter_gen.manual_seed(20240611)

    def _route(self, x):
        if self.training:
            noise = torch.empty_like(x).uniform_(1 - self.jitter, 1 + self.jitter, generator=self.jitter_gen)  # HAZARD: rng
            x = x * noise
        probs = self.router(x).softmax(-1)
        w, e = probs.topk(2, dim=-1)  # CLEAN: fixed-k topk, capturable
        return w / w.sum(-1, keepdim=True), e

    def _a2a(self, t, out_splits, in_splits):
        out = t.new_empty((sum(out_splits),) + tuple(t.shape[1:]))
        dist.all_to_all_single(out, t.contiguous(), out_splits, in_splits, group=self.group)
        return out

    def forward(self, x):
        T, d = x.shape
        w, e = self._route(x)
        flat_e = e.flatten()
        order = flat_e.argsort(stable=True)
        counts = torch.zeros(self.n_experts, dtype=torch.long, device=x.device)
        counts.scatter_add_(0, flat_e, torch.ones_like(flat_e))  # CLEAN: device-side histogram instead of bincount
        if (counts == 0).any():  # HAZARD: dynamic-control-flow
            log.warning("starved experts in this step")
        send = counts.view(self.ep, self.local).sum(1)
        recv = torch.empty_like(send)
        dist.all_to_all_single(recv, send, group=self.group)
        send_splits = send.tolist()  # HAZARD: host-sync
        recv_splits = recv.cpu().tolist()  # HAZARD: host-sync
        xs = x.repeat_interleave(2, dim=0)[order]  # CLEAN: Python-int repeat count and a CUDA index, no host round trip
        rx = self._a2a(xs, recv_splits, send_splits)
        re = self._a2a(flat_e[order], recv_splits, send_splits) - self.first
        ry = torch.zeros_like(rx)
        for j in range(self.local):
            sel = re == j
            h = rx[sel]  # HAZARD: dynamic-shape
            ry[sel] = F.gelu(h @ self.w1[j]) @ self.w2[j]
        back = self._a2a(ry, send_splits, recv_splits)
        out = torch.zeros_like(x)
        src = torch.arange(T, device=x.device).repeat_interleave(2)[order]
        out.index_add_(0, src, back * w.flatten()[order, None])  # CLEAN: combine with index_add_ on CUDA indices
        return out


class MoEBlockGraph:
    def __init__(self, layer, tokens, d):
        self.layer = layer
        self.x = torch.randn(tokens, d, device="cuda", requires_grad=True)
        self.gy = torch.randn(tokens, d, device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    def _fwd_bwd(self):
        y = self.layer(self.x)
        y.backward(self.gy)
        return y.detach()

    def capture(self, warmup=3):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                self._fwd_bwd()
        torch.cuda.current_stream().wait_stream(side)
        dist.barrier()
        with torch.cuda.graph(self.graph):
            self.y = self._fwd_bwd()

    def step(self, x, gy):
        with torch.no_grad():
            self.x.copy_(x)  # CLEAN: copy into the static leaf
            self.gy.copy_(gy)
        self.graph.replay()
        return self.y.clone(), self.x.grad.clone()
