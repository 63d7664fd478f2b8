"""Physics-informed ptychographic reconstruction (PtychoNN-style) with a differentiable
far-field forward model.

The network maps a diffraction pattern to object amplitude/phase; the exit wave
obj * probe is propagated with an FFT and compared to the measured intensities with a
Poisson NLL. The whole step (forward, loss, backward, Adam) is captured once and replayed.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class PtychoNet(nn.Module):
    def __init__(self, n=64, c=32):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                 nn.Conv2d(c, 2 * c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.dec = nn.Sequential(nn.Upsample(scale_factor=2), nn.Conv2d(2 * c, c, 3, padding=1), nn.ReLU(),
                                 nn.Upsample(scale_factor=2), nn.Conv2d(c, 2, 3, padding=1))

    def forward(self, diff):
        y = self.dec(self.enc(torch.log1p(diff)))
        return torch.sigmoid(y[:, 0]), math.pi * torch.tanh(y[:, 1])     # amplitude, phase


class PtychoTrainer:
    def __init__(self, net, probe, batch=32, n=64, seed=7, lr=3e-4):
        self.net = net.cuda()
        self.probe = probe.cuda()                            # complex (n, n), reconstructed offline
        self.base_lr, self.seed = lr, seed
        self.opt = torch.optim.Adam(self.net.parameters(), lr=lr, capturable=True)  # CLEAN: capturable Adam may be stepped inside the graph
        self.tv_weight = 1e-2
        self.step_idx = 0
        self.static_diff = torch.zeros(batch, 1, n, n, device="cuda")
        self.static_loss = torch.zeros((), device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    def _step(self):
        self.step_idx += 1  # HAZARD: host-code
        torch.cuda.manual_seed(self.seed + self.step_idx)  # HAZARD: rng
        shot = torch.randn_like(self.static_diff) * self.static_diff.clamp_min(0).sqrt()  # CLEAN: default CUDA generator is graph-safe
        diff = (self.static_diff + shot).clamp_min(0)
        amp, phase = self.net(diff)
        exit_wave = torch.polar(amp, phase) * self.probe
        pred = torch.fft.fftshift(torch.fft.fft2(exit_wave, norm="ortho"), dim=(-2, -1)).abs() ** 2
        loss = F.poisson_nll_loss(pred, self.static_diff[:, 0], log_input=False)
        tv = (phase[:, 1:] - phase[:, :-1]).abs().mean() + (phase[:, :, 1:] - phase[:, :, :-1]).abs().mean()
        w_tv = self.tv_weight  # HAZARD: python-scalar
        loss = loss + w_tv * tv
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), 1.0)  # CLEAN: clip_grad_norm_ is sync-free
        self.opt.step()
        self.static_loss.copy_(loss.detach())

    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph):
            self._step()

    def fit(self, loader, epochs):
        for epoch in range(epochs):
            self.tv_weight = 1e-2 * 0.5 ** epoch
            for g in self.opt.param_groups:
                g["lr"] = 0.5 * self.base_lr * (1 + math.cos(math.pi * epoch / epochs))  # HAZARD: optimizer
            for diff in loader:
                self.static_diff.copy_(diff, non_blocking=True)  # CLEAN: copy_ into the static input, outside the capture
                self.graph.replay()
            print(f"epoch {epoch}: poisson nll {self.static_loss.item():.4f}")  # CLEAN: host read after the replay


if __name__ == "__main__":
    n = 64
    yy, xx = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    probe = torch.exp(-((xx - n / 2) ** 2 + (yy - n / 2) ** 2) / 200.0).to(torch.complex64)
    trainer = PtychoTrainer(PtychoNet(), probe)
    trainer.capture()
    scans = [torch.rand(32, 1, n, n).pin_memory() * 1e3 for _ in range(50)]
    trainer.fit(scans, epochs=20)
