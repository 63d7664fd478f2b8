"""Data-driven subgrid-scale (SGS) stress closure for LES, trained on filtered DNS
of forced isotropic turbulence.

The whole training step (forward, loss, backward, clipping, Adam) is captured once
the first epoch has run eagerly, and is then replayed for every batch.
"""
import math

import torch
import torch.nn as nn


class SGSNet(nn.Module):
    """Filtered velocity gradients (9) + filter width -> 6 independent SGS stresses."""

    def __init__(self, width=96):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv3d(10, width, 3, padding=1), nn.SiLU(),
            nn.Conv3d(width, width, 3, padding=1), nn.SiLU(),
            nn.Conv3d(width, 6, 1),
        )

    def forward(self, grads, delta):
        return self.net(torch.cat([grads, delta], dim=1))


class ClosureTrainer:
    def __init__(self, model, batch=4, n=32, lr=3e-4, seed=7, device="cuda"):
        self.dev = device
        self.model = model.to(device)
        self.base_lr = lr
        self.opt = torch.optim.Adam(self.model.parameters(), lr=lr, capturable=True)
        self.jitter_gen = torch.Generator(device=device)
        self.jitter_gen.manual_seed(seed)
        self.realizability_w = 0.0
        self.static_grads = torch.zeros(batch, 9, n, n, n, device=device)
        self.static_tau = torch.zeros(batch, 6, n, n, n, device=device)
        self.graph = None

    def _loss(self):
        b = self.static_grads.shape[0]
        delta = 1.0 + 0.1 * torch.rand(b, 1, 1, 1, 1, device=self.dev, generator=self.jitter_gen)  # HAZARD: rng
        delta = delta.expand(-1, 1, *self.static_grads.shape[2:])
        noisy = self.static_grads + 0.01 * torch.randn_like(self.static_grads)  # CLEAN: default CUDA generator, registered by the capture
        tau = self.model(noisy, delta)
        mse = (tau - self.static_tau).pow(2).mean()
        trace = tau[:, 0] + tau[:, 3] + tau[:, 5]  # xx, yy, zz
        realizability = torch.relu(-trace).mean()
        w = self.realizability_w  # HAZARD: python-scalar
        return mse + w * realizability

    def _step(self):
        self.opt.zero_grad(set_to_none=False)
        loss = self._loss()
        if not torch.isfinite(loss):  # HAZARD: dynamic-control-flow
            return loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)  # CLEAN: clip_grad_norm_ is capturable after warm-up
        self.opt.step()  # CLEAN: Adam built with capturable=True
        return loss

    def _capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        self.graph = torch.cuda.CUDAGraph()
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            with torch.cuda.stream(side):
                for _ in range(3):
                    self._step()
            torch.cuda.current_stream().wait_stream(side)
            with torch.cuda.graph(self.graph):
                self.static_loss = self._step()

    def fit(self, loader, epochs=20):
        for epoch in range(epochs):
            self.realizability_w = min(1.0, epoch / 5)
            if epoch == 1:
                self._capture()
            for grads, tau in loader:
                self.static_grads.copy_(grads)  # CLEAN: in-place copy into the static input
                self.static_tau.copy_(tau)
                if self.graph is None:
                    self._step()
                else:
                    self.graph.replay()
            cos = 0.5 * (1 + math.cos(math.pi * (epoch + 1) / epochs))
            for group in self.opt.param_groups:
                group["lr"] = self.base_lr * cos  # HAZARD: optimizer
            print(f"epoch {epoch:2d}  loss {self.static_loss.item() if self.graph else float('nan'):.4e}")  # CLEAN: host read after the replays, outside capture


if __name__ == "__main__":
    n = 32
    loader = [(torch.randn(4, 9, n, n, n, device="cuda"), torch.randn(4, 6, n, n, n, device="cuda") * 0.1)
              for _ in range(16)]
    ClosureTrainer(SGSNet(), n=n).fit(loader)
