"""Building-footprint extraction from aerial RGB-NIR tiles (mapping pipeline, nightly fine-tune).

The backbone runs under the platform's in-house `ShardedParams` wrapper (FSDP-style: each rank
owns 1/world of a flat parameter buffer and a forward pre-hook all-gathers it); the decoder
head is replicated.  The whole iteration is captured once the wrapper and Adam state are warm.
"""
import random

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class ShardedParams:
    def __init__(self, module: nn.Module):
        self.params = list(module.parameters())
        self.world, self.rank = dist.get_world_size(), dist.get_rank()
        numel = sum(p.numel() for p in self.params)
        self.padded = -(-numel // self.world) * self.world
        self.full = torch.zeros(self.padded, device="cuda")
        self.shard = self.full.chunk(self.world)[self.rank].clone()
        module.register_forward_pre_hook(self._gather)  # CLEAN: module hooks are fine inside a manual capture

    @torch.no_grad()
    def _gather(self, module, args):
        dist.all_gather_into_tensor(self.full, self.shard)
        off = 0
        for p in self.params:
            p.copy_(self.full[off:off + p.numel()].view_as(p))
            off += p.numel()

    def reduce_grads(self):
        flat = torch.cat([p.grad.flatten() for p in self.params])
        flat = F.pad(flat, (0, self.padded - flat.numel())) / self.world
        out = torch.empty_like(self.shard)
        dist.reduce_scatter_tensor(out, flat)
        return out


class FootprintNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(4, 32, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU())
        self.head = nn.Sequential(nn.ConvTranspose2d(64, 32, 2, stride=2), nn.ReLU(), nn.Conv2d(32, 1, 1))

    def forward(self, x):
        return self.head(self.backbone(x))


class FootprintTrainer:
    def __init__(self, net, edge_weight_np, tile=512, batch=8, crop_pad=32):
        self.net = net.cuda()
        self.sharded = ShardedParams(self.net.backbone)
        self.shard_param = nn.Parameter(self.sharded.shard)
        self.shard_param.grad = torch.zeros_like(self.shard_param)
        self.lr_t = torch.tensor(1e-3, device="cuda")
        self.opt_bb = torch.optim.Adam([self.shard_param], lr=self.lr_t, capturable=True)
        self.opt_head = torch.optim.Adam(self.net.head.parameters(), lr=1e-3, capturable=True)
        self.edge_w_np = edge_weight_np.astype(np.float32)  # boundary weighting map, tile x tile
        self.tile, self.crop_pad = tile, crop_pad
        side = tile + 2 * crop_pad
        self.static_img = torch.zeros(batch, 4, side, side, device="cuda")
        self.static_mask = torch.zeros(batch, 1, side, side, device="cuda")

    def _step(self):
        dx, dy = random.randint(0, 2 * self.crop_pad), random.randint(0, 2 * self.crop_pad)  # HAZARD: host-code
        img = self.static_img[..., dy:dy + self.tile, dx:dx + self.tile]
        mask = self.static_mask[..., dy:dy + self.tile, dx:dx + self.tile]
        edge_w = torch.as_tensor(self.edge_w_np, device="cuda")  # HAZARD: pinned-memory
        logits = self.net(img)
        loss = F.binary_cross_entropy_with_logits(logits, mask, weight=1.0 + edge_w)
        if mask.sum() == 0:  # HAZARD: dynamic-control-flow
            loss = loss * 0.1
        self.net.zero_grad(set_to_none=False)
        loss.backward()
        self.shard_param.grad.copy_(self.sharded.reduce_grads())
        self.opt_bb.step()  # CLEAN: capturable Adam with a tensor learning rate
        self.opt_head.step()
        return loss.detach()

    def capture(self, warmup=3):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(warmup):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_loss = self._step()

    def set_lr(self, lr: float):
        self.lr_t.fill_(lr)  # CLEAN: in-place update of the captured tensor LR
        for g in self.opt_head.param_groups:
            g["lr"] = lr  # HAZARD: optimizer

    def fit(self, tiles, epochs=5, base_lr=1e-3):
        self.capture()
        for ep in range(epochs):
            self.set_lr(base_lr * 0.5 ** ep)
            for img, mask in tiles:
                self.static_img.copy_(img, non_blocking=True)
                self.static_mask.copy_(mask, non_blocking=True)
                self.graph.replay()
