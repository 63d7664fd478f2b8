"""Normalizing-flow sampler for 2D phi^4 lattice field theory (reverse-KL training).

Affine coupling layers with checkerboard masks map Gaussian noise to field configurations;
the whole training step (sample, flow, action, backward, Adam) is captured once and replayed.
The hopping parameter kappa is annealed towards the critical region during training.
"""
import math

import torch
import torch.nn as nn

L = 16


def checkerboard(parity):
    i, j = torch.meshgrid(torch.arange(L), torch.arange(L), indexing="ij")
    return ((i + j) % 2 == parity).float().view(1, 1, L, L)


class Coupling(nn.Module):
    def __init__(self, parity, hidden=32):
        super().__init__()
        self.register_buffer("mask", checkerboard(parity))
        self.net = nn.Sequential(
            nn.Conv2d(1, hidden, 3, padding=1, padding_mode="circular"), nn.LeakyReLU(),
            nn.Conv2d(hidden, hidden, 3, padding=1, padding_mode="circular"), nn.LeakyReLU(),
            nn.Conv2d(hidden, 2, 3, padding=1, padding_mode="circular"), nn.Tanh(),
        )

    def forward(self, x):
        frozen = x * self.mask
        s, t = self.net(frozen).chunk(2, dim=1)
        s, t = s * (1 - self.mask), t * (1 - self.mask)
        return frozen + (1 - self.mask) * (x * torch.exp(s) + t), s.flatten(1).sum(1)


class Flow(nn.Module):
    def __init__(self, n_layers=8):
        super().__init__()
        self.layers = nn.ModuleList(Coupling(k % 2) for k in range(n_layers))

    def forward(self, z):
        logdet = torch.zeros(z.shape[0], device=z.device)
        for layer in self.layers:
            z, ld = layer(z)
            logdet = logdet + ld
        return z, logdet


def action(phi, kappa, lam):
    hop = sum(phi * torch.roll(phi, 1, dims=d) for d in (2, 3))
    phi2 = phi * phi
    return (-2.0 * kappa * hop + (1.0 - 2.0 * lam) * phi2 + lam * phi2 * phi2).flatten(1).sum(1)


class FlowTrainer:
    def __init__(self, batch=1024, lam=0.022, lr=1e-3, seed=1234):
        self.flow = Flow().cuda()
        self.opt = torch.optim.Adam(self.flow.parameters(), lr=lr, capturable=True)  # CLEAN: capturable Adam inside the graph
        self.batch, self.lam, self.base_lr, self.seed = batch, lam, lr, seed
        self.kappa, self.epoch = 0.20, 0
        self.ess_log = []
        self.static_loss = torch.zeros((), device="cuda")

    def _train_step(self):
        torch.cuda.manual_seed(self.seed + self.epoch)  # HAZARD: rng
        z = torch.randn(self.batch, 1, L, L, device="cuda")  # CLEAN: default CUDA generator is captured safely
        logq0 = -0.5 * z.pow(2).flatten(1).sum(1) - 0.5 * L * L * math.log(2 * math.pi)
        phi, logdet = self.flow(z)
        logq = logq0 - logdet
        kappa = self.kappa  # HAZARD: python-scalar
        S = action(phi, kappa, self.lam)
        loss = (logq + S).mean()
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.opt.step()
        logw = (-S - logq).detach()
        ess = torch.exp(2 * torch.logsumexp(logw, 0) - torch.logsumexp(2 * logw, 0)) / self.batch
        self.ess_log.append(ess.item())  # HAZARD: host-sync
        self.static_loss.copy_(loss.detach())

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._train_step()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._train_step()

    def fit(self, epochs=200, steps=100):
        for _ in range(5):                     # eager burn-in at the starting kappa
            self._train_step()
        self.capture()
        for self.epoch in range(epochs):
            self.kappa = 0.20 + 0.07 * min(1.0, self.epoch / (0.5 * epochs))
            self.opt.param_groups[0]["lr"] = 0.5 * self.base_lr * (1 + math.cos(math.pi * self.epoch / epochs))  # HAZARD: optimizer
            for _ in range(steps):
                self.graph.replay()
            print(f"epoch {self.epoch} kappa {self.kappa:.3f} loss {self.static_loss.item():.2f}")  # CLEAN: read after replay, outside the graph


if __name__ == "__main__":
    FlowTrainer().fit()
