"""Critic refresh for an RLHF loop on a 1.3B code LM sharded with FSDP2 (fully_shard per
block). To cut launch overhead at micro-batch 2 the blocks are graphed with
torch.cuda.make_graphed_callables."""
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


class Block(nn.Module):
    def __init__(self, d=2048, heads=16, token_drop=0.05):
        super().__init__()
        self.h, self.token_drop = heads, token_drop
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.drop_gen = torch.Generator(device="cuda")
        self.timings = []

    def forward(self, x, bias):
        self.timings.append(time.perf_counter())  # HAZARD: host-code
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.h, d // self.h).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=bias)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        keep = torch.rand(b, t, 1, device=x.device, generator=self.drop_gen) > self.token_drop  # HAZARD: rng
        return x + self.down(F.gelu(self.up(self.ln2(x)))) * keep


class Critic(nn.Module):
    def __init__(self, vocab=49152, d=2048, n=24, seq=1024):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(n))
        self.value = nn.Linear(d, 1)
        causal = torch.full((seq, seq), float("-inf")).triu(1)
        self.register_buffer("bias", causal)

    def forward(self, ids):
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x, bias=self.bias)  # HAZARD: api-misuse
        return self.value(x).squeeze(-1)


def shard_and_graph(model, mesh, mb=2, seq=1024, d=2048):
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for blk in model.blocks:
        fully_shard(blk, mesh=mesh, mp_policy=mp)  # HAZARD: api-misuse
    fully_shard(model, mesh=mesh, mp_policy=mp)
    samples = tuple((torch.randn(mb, seq, d, device="cuda", requires_grad=True), model.bias)
                    for _ in model.blocks)
    graphed = torch.cuda.make_graphed_callables(tuple(model.blocks), samples, num_warmup_iters=3)
    for i, g in enumerate(graphed):
        model.blocks[i] = g
    model.value.register_forward_hook(lambda m, i, o: o.clamp_(-50, 50))  # CLEAN: hook on a module that is not graphed, added after graphing
    return model


def refresh_critic(model, opt, batches):
    model.train()  # CLEAN: same training flag as at graphing, so the graphs (not eager forwards) run
    for ids, returns in batches:
        v = model(ids.cuda(non_blocking=True))
        loss = F.mse_loss(v.float(), returns.cuda(non_blocking=True))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    print(f"critic loss {loss.item():.4f}")  # CLEAN: host read after the loop, no region is active


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    mesh = init_device_mesh("cuda", (dist.get_world_size(),))
    torch.manual_seed(0)  # CLEAN: seeded once before any graphing
    model = shard_and_graph(Critic().cuda(), mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    return model, opt


if __name__ == "__main__":
    main()
