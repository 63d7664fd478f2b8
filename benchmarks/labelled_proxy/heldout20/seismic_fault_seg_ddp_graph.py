"""Fault-probability segmentation for the E&P interpretation platform (SeisAI).
Multi-GPU trainer: DDP is built on a side stream and warmed up for 11 iterations, then the whole
iteration (forward, backward with bucketed all-reduce, optimizer step) is captured and replayed.
"""
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class FaultUNet3D(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.enc1 = nn.Conv3d(1, c, 3, padding=1)
        self.enc2 = nn.Conv3d(c, 2 * c, 3, stride=2, padding=1)
        self.dec = nn.ConvTranspose3d(2 * c, c, 2, stride=2)
        self.out = nn.Conv3d(2 * c, 1, 1)

    def forward(self, x):
        e1 = F.relu(self.enc1(x))
        d = F.relu(self.dec(F.relu(self.enc2(e1))))
        return self.out(torch.cat([e1, d], dim=1))


def soft_dice(logits, target, eps=1.0):
    p = torch.sigmoid(logits)
    return 1 - (2 * (p * target).sum() + eps) / (p.sum() + target.sum() + eps)


class DistributedGraphTrainer:
    def __init__(self, model, local_rank, base_seed=1234, flip_p=0.5):
        torch.cuda.set_device(local_rank)
        self.side = torch.cuda.Stream()
        with torch.cuda.stream(self.side):  # CLEAN: DDP built on the stream that later warms up and captures
            self.ddp = DDP(model.cuda(), device_ids=[local_rank])
        self.opt = torch.optim.AdamW(self.ddp.parameters(), lr=3e-4, weight_decay=1e-4)
        self.pos_w = torch.tensor(6.0, device="cuda")
        self.base_seed, self.flip_p = base_seed, flip_p
        self.dice_weight = 0.2
        self.step_idx = 0
        self.static_vol = torch.zeros(1, 1, 128, 128, 128, device="cuda")
        self.static_lbl = torch.zeros_like(self.static_vol)

    def _step(self):
        torch.manual_seed(self.base_seed + self.step_idx)  # HAZARD: rng
        vol, lbl = self.static_vol, self.static_lbl
        if np.random.rand() < self.flip_p:  # HAZARD: host-code
            vol, lbl = vol.flip(-1), lbl.flip(-1)
        vol = vol + 0.05 * torch.randn_like(vol)  # CLEAN: default CUDA generator, advances on every replay
        logits = self.ddp(vol)
        bce = F.binary_cross_entropy_with_logits(logits, lbl, pos_weight=self.pos_w)
        loss = bce + self.dice_weight * soft_dice(logits, lbl)  # HAZARD: python-scalar
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.ddp.parameters(), 1.0)  # CLEAN: clipping without a host read
        self.opt.step()  # HAZARD: optimizer
        return loss.detach()

    def capture(self):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            for _ in range(11):  # DDP needs 11 eager iterations before capture
                self._step()
                self.step_idx += 1
        torch.cuda.current_stream().wait_stream(self.side)
        dist.barrier()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=self.side):
            self.static_loss = self._step()
        dist.barrier()

    def train_step(self, vol, lbl):
        self.static_vol.copy_(vol, non_blocking=True)  # CLEAN: static inputs refreshed in place
        self.static_lbl.copy_(lbl, non_blocking=True)
        self.graph.replay()
        self.step_idx += 1
        return self.static_loss

    def on_epoch_end(self, epoch):
        self.dice_weight = min(1.0, 0.2 + 0.1 * epoch)


def shard_loader(rank, n=64):
    cube = np.load(f"/data/seisai/train_{rank}.npy", mmap_mode="r")
    for i in range(n):
        v = torch.from_numpy(np.ascontiguousarray(cube[i, 0])).pin_memory()
        m = torch.from_numpy(np.ascontiguousarray(cube[i, 1])).pin_memory()
        yield v.cuda(non_blocking=True)[None, None], m.cuda(non_blocking=True)[None, None]


def main():
    dist.init_process_group("nccl")
    rank = int(os.environ["LOCAL_RANK"])
    trainer = DistributedGraphTrainer(FaultUNet3D(), rank)
    trainer.capture()
    for epoch in range(20):
        for vol, lbl in shard_loader(rank):
            loss = trainer.train_step(vol, lbl)
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}")  # CLEAN: host read after the replay, outside the graph
        trainer.on_epoch_end(epoch)


if __name__ == "__main__":
    main()
