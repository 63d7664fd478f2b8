"""Megatron-style sequence-parallel MLP for a TP=8 serving deployment: the sequence-sharded
activations are all-gathered, the column/row-sharded MLP runs as a reduce-overhead compiled
method, and the partial outputs are reduce-scattered back to sequence shards."""
import math

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class SeqParallelMLP(nn.Module):
    def __init__(self, d, ffn, group, fp8_probe=False):
        super().__init__()
        self.group, self.tp, self.rank = group, dist.get_world_size(group), dist.get_rank(group)
        self.w1 = nn.Parameter(torch.randn(ffn // self.tp, d) * 0.02)  # column shard
        self.w2 = nn.Parameter(torch.randn(d, ffn // self.tp) * 0.02)  # row shard
        self.in_scale = 1.0 / math.sqrt(2.0)
        self.fp8_probe = fp8_probe
        self.amax_log = []
        self._mlp = torch.compile(self._mlp_impl, mode="reduce-overhead")

    def _mlp_impl(self, x):
        print(f"[tp{self.rank}] mlp in {tuple(x.shape)}")  # HAZARD: host-code
        if self.fp8_probe:
            self.amax_log.append(x.abs().amax().item())  # HAZARD: host-sync
        x.mul_(self.in_scale)  # HAZARD: static-address
        return F.linear(F.gelu(F.linear(x, self.w1), approximate="tanh"), self.w2)

    def _gather(self, x):
        out = x.new_empty((self.tp * x.shape[0],) + tuple(x.shape[1:]))
        dist.all_gather_into_tensor(out, x.contiguous(), group=self.group)
        return out

    def _scatter(self, y):
        out = y.new_empty((y.shape[0] // self.tp,) + tuple(y.shape[1:]))
        dist.reduce_scatter_tensor(out, y.contiguous(), group=self.group)
        return out

    @torch.no_grad()
    def forward(self, x_local):
        full = self._gather(x_local)
        y = self._mlp(full)  # HAZARD: dynamic-shape
        return self._scatter(y.clone())  # CLEAN: graph-owned output cloned before it leaves

    @torch.no_grad()
    def forward_bucketed(self, x_local, bucket):
        full = self._gather(x_local)
        padded = F.pad(full, (0, 0, 0, 0, 0, bucket - full.shape[0]))
        y = self._mlp(padded)  # CLEAN: padded to one of a few fixed bucket lengths
        return self._scatter(y[: full.shape[0]].clone())


class TPServer:
    def __init__(self, blocks, buckets=(512, 1024, 2048, 4096)):
        self.blocks, self.buckets = blocks, buckets
        self.tp = blocks[0].tp

    def bucket_for(self, n):
        return next(b for b in self.buckets if b >= n)  # CLEAN: bucket picked from the host-known length

    def run(self, x_local, padded=True):
        n = x_local.shape[0] * self.tp
        for blk in self.blocks:
            if padded:
                x_local = x_local + blk.forward_bucketed(x_local, self.bucket_for(n))
            else:
                x_local = x_local + blk(x_local)
        return x_local

    def serve(self, requests):
        outs = []
        for x_local in requests:  # sequence shards of natural length (multiple of tp)
            outs.append(self.run(x_local.cuda(non_blocking=True), padded=False))
        return outs


if __name__ == "__main__":
    dist.init_process_group("nccl")
    g = dist.new_group(list(range(dist.get_world_size())))
    server = TPServer([SeqParallelMLP(4096, 16384, g).cuda() for _ in range(4)])
