"""Food-101 fine-tuning of a small ConvNeXt (stochastic depth, EMA, cosine LR, label smoothing).

The assistant's "make it faster" diff: channels_last via a pre-hook, and the whole model
graphed with `torch.cuda.make_graphed_callables` (forward + backward), optimizer eager.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim, drop_path=0.0):
        super().__init__()
        self.dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim)
        self.pw = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.gamma = nn.Parameter(1e-6 * torch.ones(dim))
        self.drop_path = drop_path

    def forward(self, x):
        h = self.pw(self.norm(self.dw(x).permute(0, 2, 3, 1))) * self.gamma
        p = self.drop_path  # HAZARD: python-scalar
        if self.training and p > 0:
            keep = torch.rand(x.shape[0], 1, 1, 1, device=x.device) >= p  # CLEAN: default CUDA generator
            h = h * keep / (1 - p)
        return x + h.permute(0, 3, 1, 2)


class ConvNeXtSmall(nn.Module):
    def __init__(self, n_classes=101, dims=(96, 192, 384, 768), depths=(3, 3, 9, 3), debug=True):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, dims[0], 4, 4), nn.GroupNorm(1, dims[0]))
        stages = []
        for i, (d, n) in enumerate(zip(dims, depths)):
            down = nn.Identity() if i == 0 else nn.Sequential(nn.GroupNorm(1, dims[i - 1]), nn.Conv2d(dims[i - 1], d, 2, 2))
            stages.append(nn.Sequential(down, *[Block(d) for _ in range(n)]))
        self.stages = nn.ModuleList(stages)
        self.head = nn.Sequential(nn.LayerNorm(dims[-1]), nn.Linear(dims[-1], n_classes))
        self.debug = debug

    def forward(self, x):
        x = self.stem(x)
        if self.debug:
            print(f"stem activation std {x.float().std():.3f}")  # HAZARD: host-sync
        for st in self.stages:
            x = st(x)
        if torch.isnan(x).any():  # HAZARD: dynamic-control-flow
            raise RuntimeError("NaN in features")
        return self.head(x.mean((2, 3)))

    def set_drop_path(self, rate):
        blocks = [b for st in self.stages for b in st if isinstance(b, Block)]
        for i, b in enumerate(blocks):
            b.drop_path = rate * i / (len(blocks) - 1)


def train(loader, val_loader, epochs=30, batch=64, base_lr=4e-3):
    model = ConvNeXtSmall().cuda().to(memory_format=torch.channels_last)
    model.register_forward_pre_hook(lambda m, args: tuple(a.contiguous(memory_format=torch.channels_last) for a in args))  # HAZARD: api-misuse
    ema = ConvNeXtSmall(debug=False).cuda().eval()
    ema.load_state_dict(model.state_dict())
    sample = torch.randn(batch, 3, 224, 224, device="cuda")
    model.set_drop_path(0.0)
    g_model = torch.cuda.make_graphed_callables(model, (sample,))
    opt = torch.optim.AdamW(model.parameters(), lr=base_lr, weight_decay=0.05)
    steps = epochs * len(loader)
    for epoch in range(epochs):
        model.set_drop_path(0.1 * min(1.0, epoch / 5))  # ramp stochastic depth over 5 epochs
        for it, (x, y) in enumerate(loader):  # drop_last=True
            lr = 0.5 * base_lr * (1 + math.cos(math.pi * (epoch * len(loader) + it) / steps))
            for g in opt.param_groups:
                g["lr"] = lr  # CLEAN: eager optimizer, LR read at each eager step
            with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: autocast without its cache
                logits = g_model(x.cuda(non_blocking=True))
            loss = F.cross_entropy(logits.float(), y.cuda(non_blocking=True), label_smoothing=0.1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            with torch.no_grad():
                for pe, p in zip(ema.parameters(), model.parameters()):
                    pe.lerp_(p, 1e-3)  # CLEAN: eager EMA outside the graph
        print(f"epoch {epoch} loss {loss.item():.3f}")  # CLEAN: host read after the eager step
