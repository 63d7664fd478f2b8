"""Raman spectra denoiser for a process-analytics line: injected baseline and precision strategies, torch-graphed."""
import contextlib
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

class AmpPolicy:
    def context(self):
        return torch.autocast(device_type="cuda", dtype=torch.float16)  # HAZARD: autocast-cache

class ReplayAmp:
    def context(self):
        return torch.autocast(device_type="cuda", dtype=torch.float16, cache_enabled=False)  # CLEAN: cache disabled

class FullPrecision:
    def context(self):
        return contextlib.nullcontext()  # CLEAN: no autocast at all

class PolyBaseline:
    def __init__(self, n=1024, order=5):
        x = np.linspace(-1, 1, n)
        self.V = np.vander(x, order).astype(np.float32)
    def remove(self, y):
        V = torch.from_numpy(self.V).cuda()  # HAZARD: pinned-memory
        coef = (V.t() @ y.t()) / V.shape[0]
        return y - (V @ coef).t()

class LearnedBaseline(nn.Module):
    def __init__(self):
        super().__init__()
        self.smooth = nn.Conv1d(1, 1, 101, padding=50, bias=False)
    def remove(self, y):
        return y - self.smooth(y.unsqueeze(1)).squeeze(1)  # CLEAN: convolutional baseline, device only

class Denoiser(nn.Module):
    def __init__(self, baseline):
        super().__init__()
        self.baseline = baseline
        self.net = nn.Sequential(nn.Conv1d(1, 32, 9, padding=4), nn.GELU(), nn.Conv1d(32, 1, 9, padding=4))
    def forward(self, y):
        y = self.baseline.remove(y)
        y = y + self.net(y.unsqueeze(1)).squeeze(1)
        return self._normalize(y)
    def _normalize(self, y):
        peak = y.amax(-1, keepdim=True)
        if (peak <= 0).any():  # HAZARD: dynamic-control-flow
            peak = peak.abs() + 1e-3
        return y / peak * self._reference_height(y)
    def _reference_height(self, y):
        return float(y[:, 512].mean())  # HAZARD: host-sync

class LineTrainer:
    def __init__(self, denoiser, precision, batch=32, n=1024):
        self.model = denoiser.cuda()
        sample = torch.randn(batch, n, device="cuda")
        with precision.context():
            self.graphed = torch.cuda.make_graphed_callables(self.model, (sample,))
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)
    def step(self, noisy, clean, replay_precision):
        with replay_precision.context():
            out = self.graphed(noisy)
        loss = F.mse_loss(out.float(), clean)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()  # CLEAN: eager optimizer step
        return loss.detach()

def train_line(loader, site="lab"):
    baseline = PolyBaseline() if site == "plant" else LearnedBaseline()
    trainer = LineTrainer(Denoiser(baseline), AmpPolicy() if site == "plant" else FullPrecision())
    return [trainer.step(n.cuda(), c.cuda(), ReplayAmp()) for n, c in loader]
