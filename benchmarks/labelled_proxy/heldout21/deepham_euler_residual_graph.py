"""Deep-learning solution of a Krusell-Smith economy (Maliar, Maliar & Winant style):
a policy net maps (wealth, log productivity, K, z) to the consumption share and the KKT
multiplier, trained on all-in-one Euler residuals with two independent shock draws.

The whole training step (simulate, residuals, backward, Adam) is one CUDA graph; the
capture code was adapted from the PyTorch "whole network capture" example.
"""
import math

import numpy as np
import torch
import torch.nn as nn

ALPHA, DELTA = 0.36, 0.025


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2))

    def forward(self, s):
        out = self.net(s)
        return torch.sigmoid(out[:, :1]), torch.exp(out[:, 1:])   # consumption share, multiplier


def prices(K, z):
    return ALPHA * z * K ** (ALPHA - 1) - DELTA, (1 - ALPHA) * z * K ** ALPHA


def fb(a, b):  # Fischer-Burmeister function for the borrowing constraint
    return a + b - torch.sqrt(a * a + b * b + 1e-12)


class EulerTrainer:
    def __init__(self, batch=4096, device="cuda"):
        self.dev, self.batch = device, batch
        self.policy = Policy().to(device)
        self.opt = torch.optim.Adam(self.policy.parameters(), lr=1e-3, capturable=True)
        self.beta, self.gamma, self.rho, self.sig_e = 0.90, 2.0, 0.9, 0.2
        self.a_lo, self.a_hi = 0.0, 50.0
        self.shock_gen = torch.Generator(device=device)
        self.shock_gen.manual_seed(11)
        self.K_state = torch.full((1, 1), 38.0, device=device)
        self.z_state = torch.ones(1, 1, device=device)
        self.loss = torch.zeros((), device=device)
        self.graph = torch.cuda.CUDAGraph()

    def _step(self):
        B = self.batch
        a = self.a_lo + (self.a_hi - self.a_lo) * torch.rand(B, 1, device=self.dev)  # CLEAN: default CUDA generator, captured with the graph
        loge = self.sig_e / (1 - self.rho ** 2) ** 0.5 * torch.randn(B, 1, device=self.dev)
        K, z = self.K_state.expand(B, 1), self.z_state.expand(B, 1)
        share, mult = self.policy(torch.cat([a, loge, K, z], 1))
        r, w = prices(K, z)
        m = (1 + r) * a + w * loge.exp()
        c = share * m
        a1 = m - c
        dz = np.random.normal(0.0, 0.01)  # HAZARD: host-code
        z1 = z * math.exp(dz)
        K1 = a1.mean().view(1, 1).expand(B, 1)
        eps = torch.randn(B, 2, device=self.dev, generator=self.shock_gen)  # HAZARD: rng
        beta = self.beta  # HAZARD: python-scalar
        res = []
        for k in range(2):
            loge1 = self.rho * loge + self.sig_e * eps[:, k:k + 1]
            share1, _ = self.policy(torch.cat([a1, loge1, K1, z1], 1))
            r1, w1 = prices(K1, z1)
            c1 = share1 * ((1 + r1) * a1 + w1 * loge1.exp())
            res.append(beta * (1 + r1) * (c1 / c) ** (-self.gamma) - mult)
        loss = (res[0] * res[1]).mean() + (fb(1 - mult, a1 / m) ** 2).mean()
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.policy.parameters(), 1.0)  # CLEAN: clip_grad_norm_ is capturable
        self.opt.step()  # CLEAN: Adam built with capturable=True
        self.loss.copy_(loss.detach())
        self.K_state.copy_(K1[:1].detach())
        self.z_state.copy_(z1[:1])

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(5):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self._step()

    def train(self, steps=60_000):
        self.capture()
        for it in range(steps):
            self.beta = 0.90 + 0.06 * min(1.0, it / 20_000)   # homotopy on the discount factor
            if it == 30_000:
                self.opt.param_groups[0]["lr"] = 1e-4  # HAZARD: optimizer
            self.graph.replay()
            if it % 1000 == 0:
                print(f"{it:6d}  loss {self.loss.item():.3e}  K {self.K_state.item():.2f}")  # CLEAN: read between replays
        return self.policy


if __name__ == "__main__":
    torch.manual_seed(0)
    pol = EulerTrainer().train()
    torch.save(pol.state_dict(), "ks_policy.pt")
