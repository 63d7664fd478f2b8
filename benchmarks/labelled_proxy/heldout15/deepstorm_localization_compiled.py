"""Deep-STORM single-molecule localisation microscopy.

A CNN maps 64x64 camera frames with blinking emitters to an 8x super-resolved
density map; it is trained on simulated frames (ground-truth spike maps and
photon counts). The loss and the Adam step are compiled with
backend="cudagraphs"; the emitter photon floor is annealed during training.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

UP, FRAME = 8, 64


def conv(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())


class DeepSTORM(nn.Module):
    def __init__(self, ch=32):
        super().__init__()
        self.enc = nn.Sequential(conv(1, ch), conv(ch, 2 * ch), conv(2 * ch, 4 * ch))
        self.dec = nn.Sequential(nn.Upsample(scale_factor=UP, mode="nearest"), conv(4 * ch, 2 * ch), conv(2 * ch, ch))
        self.out = nn.Conv2d(ch, 1, 1)

    def forward(self, x):
        return F.relu(self.out(self.dec(self.enc(x))))


def psf_kernel(sigma, size=7, device="cuda"):
    r = torch.arange(size, device=device, dtype=torch.float32) - size // 2
    g = torch.exp(-(r[:, None] ** 2 + r[None, :] ** 2) / (2 * sigma * sigma))
    return (g / g.sum()).view(1, 1, size, size)


class StormTrainer:
    def __init__(self, model, lr=1e-3):
        self.model = model.cuda()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.min_photons = 400.0
        self.loss_fn = torch.compile(self._loss, backend="cudagraphs")
        self.opt_step = torch.compile(self.opt.step, backend="cudagraphs")

    def _loss(self, frames, spikes, photons):
        sigma = float(np.random.uniform(0.9, 1.3))  # HAZARD: host-code
        floor = self.min_photons  # HAZARD: python-scalar
        k = psf_kernel(sigma * UP / 4)
        target = F.conv2d(spikes * (photons > floor), k, padding=3)
        pred = self.model(frames)
        loss = F.mse_loss(F.conv2d(pred, k, padding=3), target) + 1e-3 * pred.abs().mean()
        if torch.isnan(loss):  # HAZARD: dynamic-control-flow
            loss = (pred * 0.0).sum()
        return loss

    def fit(self, loader, epochs=60):
        for epoch in range(epochs):
            running = 0.0
            for frames, spikes, photons in loader:
                loss = self.loss_fn(frames.cuda(non_blocking=True), spikes.cuda(non_blocking=True),
                                    photons.cuda(non_blocking=True))
                running += loss.item()  # CLEAN: read before backward, outside the compiled code
                loss.backward()
                self.opt_step()
                self.opt.zero_grad(set_to_none=True)
            self.min_photons = max(100.0, self.min_photons * 0.9)
            if epoch % 15 == 14:
                for group in self.opt.param_groups:
                    group["lr"] *= 0.5  # HAZARD: optimizer
            print(f"epoch {epoch}: loss {running / len(loader):.5f}")

    @torch.no_grad()
    def reconstruct(self, stack, batch=256):
        """Sum the super-resolved density over an acquisition stack [T, 1, 64, 64]."""
        self.model.eval()
        image = torch.zeros(1, 1, FRAME * UP, FRAME * UP, device="cuda")
        for i in range(0, stack.shape[0], batch):
            image += self.model(stack[i:i + batch].cuda()).sum(0, keepdim=True)
        if torch.isnan(image).any():  # CLEAN: eager check outside the compiled functions
            raise FloatingPointError("NaN in reconstruction")
        return image[0, 0].cpu().numpy()
