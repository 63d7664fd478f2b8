"""Fourier neural operator for 2D Darcy flow (coefficient a(x) -> pressure u(x)).

The whole training step (augmentation, forward, relative L2 + H1 loss, backward,
AdamW) is captured once per run and replayed for every batch.
"""
import math

import torch
import torch.nn as nn


class SpectralConv2d(nn.Module):
    def __init__(self, c, modes):
        super().__init__()
        scale = 1.0 / (c * c)
        self.modes = modes
        self.w1 = nn.Parameter(scale * torch.randn(c, c, modes, modes, dtype=torch.cfloat))
        self.w2 = nn.Parameter(scale * torch.randn(c, c, modes, modes, dtype=torch.cfloat))

    def forward(self, x):
        b, c, h, w = x.shape
        xf = torch.fft.rfft2(x.float())
        out = torch.zeros(b, c, h, w // 2 + 1, dtype=torch.cfloat, device=x.device)
        m = self.modes
        out[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", xf[:, :, :m, :m], self.w1)
        out[:, :, -m:, :m] = torch.einsum("bixy,ioxy->boxy", xf[:, :, -m:, :m], self.w2)
        return torch.fft.irfft2(out, s=(h, w))


class FNO2d(nn.Module):
    def __init__(self, width=32, modes=12, depth=4):
        super().__init__()
        self.lift = nn.Conv2d(3, width, 1)
        self.spectral = nn.ModuleList([SpectralConv2d(width, modes) for _ in range(depth)])
        self.local = nn.ModuleList([nn.Conv2d(width, width, 1) for _ in range(depth)])
        self.proj = nn.Sequential(nn.Conv2d(width, 128, 1), nn.GELU(), nn.Conv2d(128, 1, 1))

    def forward(self, a):
        h, w = a.shape[-2:]
        gy, gx = torch.meshgrid(torch.linspace(0, 1, h, device=a.device),
                                torch.linspace(0, 1, w, device=a.device), indexing="ij")
        x = self.lift(torch.cat([a, gx.expand_as(a), gy.expand_as(a)], 1))
        for spec, loc in zip(self.spectral, self.local):
            x = nn.functional.gelu(spec(x) + loc(x))
        return self.proj(x)


def rel_l2(pred, true):
    return ((pred - true).flatten(1).norm(dim=1) / true.flatten(1).norm(dim=1)).mean()


def grad_xy(u):
    return torch.cat([u[..., 1:, :-1] - u[..., :-1, :-1], u[..., :-1, 1:] - u[..., :-1, :-1]], 1)


class DarcyTrainer:
    def __init__(self, model, batch=20, res=85, base_lr=1e-3, seed=0, verbose=True, device="cuda"):
        self.model = model.to(device)
        self.opt = torch.optim.AdamW(model.parameters(), lr=base_lr, weight_decay=1e-4, capturable=True)
        self.base_lr, self.seed, self.verbose = base_lr, seed, verbose
        self.static_a = torch.zeros(batch, 1, res, res, device=device)
        self.static_u = torch.zeros(batch, 1, res, res, device=device)
        self.epoch, self.h1_weight = 0, 0.0
        self.graph = torch.cuda.CUDAGraph()

    def _augment(self, a, u):
        torch.cuda.manual_seed(self.seed + self.epoch)  # HAZARD: rng
        flip = torch.rand(a.shape[0], 1, 1, 1, device=a.device) < 0.5
        return torch.where(flip, a.flip(-1), a), torch.where(flip, u.flip(-1), u)  # CLEAN: torch.where select, no host sync

    def _step(self):
        a, u = self._augment(self.static_a, self.static_u)
        self.opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):  # CLEAN: autocast entered inside the captured step
            pred = self.model(a).float()
        w = self.h1_weight  # HAZARD: python-scalar
        loss = rel_l2(pred, u) + w * rel_l2(grad_xy(pred), grad_xy(u))
        loss.backward()
        self.opt.step()  # CLEAN: AdamW created with capturable=True
        if self.verbose:
            print(f"[fno] batch loss {loss:.4e}")  # HAZARD: host-sync
        return loss.detach()

    def _eager_step(self, side):
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self._step()
        torch.cuda.current_stream().wait_stream(side)

    def fit(self, loader, epochs=500):
        side = torch.cuda.Stream()
        for epoch in range(epochs):
            self.epoch = epoch
            self.h1_weight = min(0.1, 0.005 * epoch)
            lr = 0.5 * self.base_lr * (1 + math.cos(math.pi * epoch / epochs))
            for group in self.opt.param_groups:
                group["lr"] = lr  # HAZARD: optimizer
            if epoch == 1:                       # epoch 0 ran eagerly and served as warm-up
                with torch.cuda.graph(self.graph):
                    self.static_loss = self._step()
            for a, u in loader:
                self.static_a.copy_(a, non_blocking=True)  # CLEAN: copy_ into the captured input
                self.static_u.copy_(u, non_blocking=True)
                if epoch == 0:
                    self._eager_step(side)
                else:
                    self.graph.replay()
