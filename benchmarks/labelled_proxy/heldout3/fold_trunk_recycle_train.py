"""Training step for a small structure-prediction trunk with recycling.

Crops are fixed at CROP residues. One whole training step (recycles, loss,
backward, clip, step) is captured per crop size and replayed.
"""
from random import randint

import torch
import torch.nn as nn
import torch.nn.functional as F

CROP, MAX_RECYCLE = 256, 3


class PairBlock(nn.Module):
    def __init__(self, c=128, p_row_drop=0.25):
        super().__init__()
        self.norm = nn.LayerNorm(c)
        self.tri_a, self.tri_b, self.gate = nn.Linear(c, c), nn.Linear(c, c), nn.Linear(c, c)
        self.out = nn.Linear(c, c)
        self.p_row_drop = p_row_drop
        self.drop_gen = torch.Generator(device="cuda")

    def row_dropout(self, x):
        keep = torch.full(x.shape[:-2] + (1, 1), 1 - self.p_row_drop, device=x.device)
        mask = torch.bernoulli(keep, generator=self.drop_gen)  # HAZARD: rng
        return x * mask / (1 - self.p_row_drop)

    def forward(self, z):
        y = self.norm(z)
        a, b = self.tri_a(y), self.tri_b(y)
        upd = torch.einsum("bikc,bjkc->bijc", a, b) * torch.sigmoid(self.gate(y))
        return z + self.row_dropout(self.out(upd))


class Trunk(nn.Module):
    def __init__(self, c=128, blocks=4, n_bins=64):
        super().__init__()
        self.embed = nn.Linear(21, c)
        self.recycle_norm = nn.LayerNorm(c)
        self.blocks = nn.ModuleList(PairBlock(c) for _ in range(blocks))
        self.distogram = nn.Linear(c, n_bins)

    def forward(self, seq_onehot, n_recycle):
        s = self.embed(seq_onehot)
        z0 = s[:, :, None] + s[:, None, :]
        prev = torch.zeros_like(z0)
        for r in range(n_recycle + 1):
            with torch.set_grad_enabled(r == n_recycle):
                z = z0 + self.recycle_norm(prev.detach())  # CLEAN: detach keeps recycling iterations out of autograd
                for blk in self.blocks:
                    z = blk(z)
            if r > 0 and torch.allclose(prev, z, atol=1e-3):  # HAZARD: host-sync
                break
            prev = z
        return self.distogram(z + z.transpose(1, 2))


class TrunkTrainer:
    def __init__(self, trunk, lr=1e-3):
        self.trunk = trunk.cuda()
        self.opt = torch.optim.Adam(trunk.parameters(), lr=lr, fused=True)
        self.seq = torch.zeros(1, CROP, 21, device="cuda")
        self.bins = torch.zeros(1, CROP, CROP, dtype=torch.long, device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    def step(self):
        n_recycle = randint(0, MAX_RECYCLE)  # HAZARD: host-code
        logits = self.trunk(self.seq, n_recycle)
        loss = F.cross_entropy(logits.permute(0, 3, 1, 2).float(), self.bins)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.trunk.parameters(), 0.1)  # CLEAN: device-side norm, no host sync by default
        self.opt.step()  # HAZARD: optimizer
        self.opt.zero_grad(set_to_none=False)
        return loss.detach()

    def build(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            with torch.cuda.stream(s):
                for _ in range(3):
                    self.step()
            torch.cuda.current_stream().wait_stream(s)
            with torch.cuda.graph(self.graph):
                self.loss = self.step()

    def train(self, loader):
        for seq, bins in loader:
            self.seq.copy_(seq, non_blocking=True)  # CLEAN: copy_ into the static input
            self.bins.copy_(bins, non_blocking=True)
            self.graph.replay()
            yield self.loss.item()  # CLEAN: host read after replay, outside the capture
