"""ZeRO-2 whole step for a masked-LM encoder: flat grads reduce-scattered, shard clipped + AdamW, params all-gathered."""
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.h, d // self.h).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.ff(self.ln2(x))


class MaskedLM(nn.Module):
    def __init__(self, vocab=32000, d=768, layers=12):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, 12) for _ in range(layers))
        self.head = nn.Linear(d, vocab)

    def forward(self, ids, labels):
        x = self.emb(ids)
        for blk in self.blocks: x = blk(x)
        return F.cross_entropy(self.head(x).flatten(0, 1), labels.flatten(), ignore_index=-100)


class Zero2Step:
    def __init__(self, model, rank, world, lr=2e-4, max_norm=1.0):
        self.model, self.rank, self.world, self.max_norm = model, rank, world, max_norm
        self.params = [p for p in model.parameters() if p.requires_grad]
        total = sum(p.numel() for p in self.params)
        self.shard = math.ceil(total / world)
        self.flat_param = torch.zeros(self.shard * world, device="cuda")
        self.flat_grad = torch.zeros_like(self.flat_param)
        off = 0
        for p in self.params:
            self.flat_param[off:off + p.numel()].copy_(p.data.view(-1))
            p.data = self.flat_param[off:off + p.numel()].view_as(p)  # CLEAN: params moved into the flat buffer once, before warm-up and capture
            off += p.numel()
        self.local = self.flat_param[rank * self.shard:(rank + 1) * self.shard]
        self.master = nn.Parameter(self.local.clone())
        self.grad_shard = torch.zeros(self.shard, device="cuda")
        self.master.grad = self.grad_shard
        self.opt = torch.optim.AdamW([self.master], lr=lr, weight_decay=0.01)
        self.watch = [0, 4096, 65536, 1 << 20]  # a few weights mirrored to the dashboard
        self.probe = torch.zeros(len(self.watch), device="cuda")
        self.ids = torch.zeros(16, 512, dtype=torch.long, device="cuda")
        self.labels = torch.full((16, 512), -100, dtype=torch.long, device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    def step(self):
        loss = self.model(self.ids, self.labels)
        loss.backward()
        off = 0
        for p in self.params:
            self.flat_grad[off:off + p.numel()].copy_(p.grad.view(-1))
            off += p.numel()
        self.flat_grad.div_(self.world)  # CLEAN: world size is fixed for the life of the job
        dist.reduce_scatter_tensor(self.grad_shard, self.flat_grad)  # CLEAN: NCCL collectives can be captured (NCCL >= 2.9.6), same call on every rank
        self.probe.copy_(self.flat_grad[self.watch])  # HAZARD: host-sync
        norm_sq = self.grad_shard.pow(2).sum()
        dist.all_reduce(norm_sq)
        gnorm = norm_sq.sqrt().item()  # HAZARD: host-sync
        if gnorm > self.max_norm:
            self.grad_shard.mul_(self.max_norm / gnorm)
        self.opt.step()  # HAZARD: optimizer
        self.local.copy_(self.master.detach())
        dist.all_gather_into_tensor(self.flat_param, self.local)
        self.model.zero_grad(set_to_none=True)
        return loss.detach()

    def capture(self, warmup=3):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            with torch.cuda.stream(side):
                for _ in range(warmup):
                    self.step()
            torch.cuda.current_stream().wait_stream(side)
            with torch.cuda.graph(self.graph):
                self.static_loss = self.step()

    def run(self, batches):
        for ids, labels in batches:
            self.ids.copy_(ids)  # CLEAN: in-place refill of the static batch
            self.labels.copy_(labels); self.graph.replay()
        return self.static_loss.clone()


if __name__ == "__main__":
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    z = Zero2Step(MaskedLM().cuda(), dist.get_rank(), dist.get_world_size())
    z.capture()
