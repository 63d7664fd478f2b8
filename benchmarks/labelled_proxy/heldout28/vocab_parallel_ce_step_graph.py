"""Megatron-style vocab-parallel embedding and cross entropy for a 256k-vocab LM, with the
whole tensor-parallel training step captured once and replayed."""
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class _ReduceFwd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        x = x.clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, g):
        return g, None


class VocabShard(nn.Module):
    def __init__(self, vocab, d, group):
        super().__init__()
        tp, r = dist.get_world_size(group), dist.get_rank(group)
        self.group, self.n = group, vocab // tp
        self.start, self.end = r * self.n, (r + 1) * self.n
        self.weight = nn.Parameter(torch.randn(self.n, d) * 0.02)

    def embed(self, ids):
        oob = (ids < self.start) | (ids >= self.end)
        local = (ids - self.start).masked_fill(oob, 0)  # CLEAN: masked_fill keeps the shape, no indexing by mask
        e = F.embedding(local, self.weight).masked_fill(oob[..., None], 0.0)
        return _ReduceFwd.apply(e, self.group)

    def loss(self, h, target):
        logits = (h @ self.weight.t()).float()
        lmax = logits.detach().max(-1).values
        dist.all_reduce(lmax, op=dist.ReduceOp.MAX, group=self.group)
        logits = logits - lmax[..., None]
        oob = (target < self.start) | (target >= self.end)
        t = (target - self.start).masked_fill(oob, 0)
        picked = logits.gather(-1, t[..., None]).squeeze(-1).masked_fill(oob, 0.0)
        picked = _ReduceFwd.apply(picked, self.group)
        sum_exp = _ReduceFwd.apply(logits.exp().sum(-1), self.group)
        return sum_exp.log() - picked


class TPTrainStep:
    def __init__(self, body, shard, batch, seq, seed=17):
        self.body, self.shard = body, shard
        params = list(body.parameters()) + list(shard.parameters())
        self.opt = torch.optim.AdamW(params, lr=3e-4, capturable=True)  # CLEAN: capturable AdamW keeps its step on the device
        self.ids = torch.zeros(batch, seq, dtype=torch.long, device="cuda")
        self.tgt = torch.zeros(batch, seq, dtype=torch.long, device="cuda")
        self.seed, self.it = seed, 0
        self.stamps = []
        self.graph = torch.cuda.CUDAGraph()

    def _step(self):
        torch.manual_seed(self.seed + self.it)  # HAZARD: rng
        self.stamps.append(time.perf_counter())  # HAZARD: host-code
        h = self.body(self.shard.embed(self.ids))
        tok_loss = self.shard.loss(h, self.tgt)
        valid = tok_loss[self.tgt != -100]  # HAZARD: dynamic-shape
        loss = valid.mean()
        if torch.isnan(loss):  # HAZARD: dynamic-control-flow
            raise FloatingPointError("nan loss in TP step")
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=False)
        return loss.detach()

    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            with torch.cuda.stream(side):
                for self.it in range(3):
                    self._step()
            torch.cuda.current_stream().wait_stream(side)
            self.it += 1
            with torch.cuda.graph(self.graph):
                self.static_loss = self._step()

    def train(self, batches):
        for ids, tgt in batches:
            self.ids.copy_(ids)
            self.tgt.copy_(torch.where(tgt == 0, torch.full_like(tgt, -100), tgt))  # CLEAN: torch.where remap, no shape change
            self.graph.replay()
            self.it += 1
        return float(self.static_loss)  # CLEAN: read after replay, outside the graph
