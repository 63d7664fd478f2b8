"""DDP fine-tuning of a speech-emotion classifier with gradient accumulation through
`no_sync()`: the backbone is DDP-wrapped and eager, the pooling + classification head loss
and the optimizer step are compiled with options={"triton.cudagraphs": True}."""
import contextlib
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

CG = {"triton.cudagraphs": True}


class AttnPoolHead(nn.Module):
    def __init__(self, d=768, n_cls=8):
        super().__init__()
        self.att, self.cls = nn.Linear(d, 1), nn.Linear(d, n_cls)

    def forward(self, h, mask):
        a = self.att(h).squeeze(-1).masked_fill(~mask, float("-inf"))  # CLEAN: masked_fill, fixed shape
        return self.cls((torch.softmax(a, -1)[..., None] * h).sum(1))


class Trainer:
    def __init__(self, backbone, head, accum=4, wd=0.01):
        self.backbone = DDP(backbone.cuda(), device_ids=[int(os.environ["LOCAL_RANK"])])
        self.head = head.cuda()  # small head: grads averaged by hand at the sync step
        params = list(self.backbone.parameters()) + list(self.head.parameters())
        self.opt = torch.optim.AdamW(params, lr=2e-5, weight_decay=wd)
        self.accum = accum
        self.frames_seen = 0
        self.last_t = None
        self.head_loss = torch.compile(self._head_loss, options=CG)
        self.opt_step = torch.compile(self.opt.step, options=CG)
        self.eval_head = torch.compile(self._eval_head)

    def _head_loss(self, h, mask, y):
        self.last_t = time.time()  # HAZARD: host-code
        self.frames_seen += int(mask.sum().item())  # HAZARD: host-sync
        logits = self.head(h, mask)
        return F.cross_entropy(logits, y, label_smoothing=0.05) / self.accum  # HAZARD: python-scalar

    def _eval_head(self, h, mask):
        logits = self.head(h, mask)
        print("eval batch", logits.shape[0])  # CLEAN: default torch.compile (no CUDA graphs); a graph break only
        return logits.argmax(-1)

    def micro_step(self, wav, mask, y, sync):
        with self.backbone.no_sync() if not sync else contextlib.nullcontext():
            h = self.backbone(wav, mask)
            loss = self.head_loss(h, mask, y)
            loss.backward()
        return loss.detach().clone()  # CLEAN: cloned before the compiled optimizer step runs

    def fit(self, loader, epochs):
        for ep in range(epochs):
            if ep == 2:
                for g in self.opt.param_groups:
                    g["weight_decay"] = 0.0  # HAZARD: optimizer
                self.accum = 8
            for i, (wav, mask, y) in enumerate(loader):
                sync = (i + 1) % self.accum == 0
                self.micro_step(wav.cuda(non_blocking=True), mask.cuda(non_blocking=True),
                                y.cuda(non_blocking=True), sync)
                if sync:
                    for p in self.head.parameters():
                        dist.all_reduce(p.grad)
                        p.grad.div_(dist.get_world_size())
                    self.opt_step()
                    self.opt.zero_grad(set_to_none=False)
            if dist.get_rank() == 0:
                print(f"epoch {ep}: {self.frames_seen} frames")  # CLEAN: eager print outside compiled code

    @torch.no_grad()
    def predict(self, wav, mask):
        return self.eval_head(self.backbone.module(wav, mask), mask)
