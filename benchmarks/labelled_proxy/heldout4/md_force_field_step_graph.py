"""Langevin molecular dynamics with a learned pair potential; one MD step per graph replay.

Forces come from autograd of the learned energy.  The whole BAOAB-like step is
captured once and replayed for millions of steps.
"""
import math

import numpy as np
import torch
import torch.nn as nn


class LearnedPairPotential(nn.Module):
    def __init__(self, n_rbf=32, cutoff=5.0, width=64):
        super().__init__()
        self.cutoff = cutoff
        self.register_buffer("centers", torch.linspace(0.5, cutoff, n_rbf))
        self.gamma = 10.0 / cutoff
        self.mlp = nn.Sequential(nn.Linear(n_rbf, width), nn.SiLU(), nn.Linear(width, 1))

    def forward(self, pos, box):
        d = pos[:, None, :] - pos[None, :, :]
        d = d - box * torch.round(d / box)
        r = (d.pow(2).sum(-1) + 1e-12).sqrt() + 1e3 * torch.eye(pos.shape[0], device=pos.device)
        within = r < self.cutoff
        rbf = torch.exp(-self.gamma * (r[..., None] - self.centers) ** 2)
        e = self.mlp(rbf).squeeze(-1)
        return 0.5 * torch.where(within, e, torch.zeros_like(e)).sum()  # CLEAN: masked with where, shapes stay fixed


class LangevinIntegrator:
    def __init__(self, ff: LearnedPairPotential, pos, vel, masses, box, dt=1e-3, kT=0.596, friction=1.0):
        self.ff = ff
        self.pos, self.vel = pos.clone(), vel.clone()
        self.inv_m = (1.0 / masses)[:, None]
        self.box = box
        self.dt, self.kT, self.friction = dt, kT, friction
        self.forces = torch.zeros_like(pos)
        self.ke = torch.zeros((), device=pos.device)
        self.noise_gen = torch.Generator(device=pos.device)
        self.noise_gen.manual_seed(2024)
        self.graph = None
        self.target_ke = 1.5 * pos.shape[0] * kT

    def _forces(self, pos):
        pos = pos.detach().requires_grad_(True)
        (grad,) = torch.autograd.grad(self.ff(pos, self.box), pos)
        return -grad

    def _step(self):
        dt = self.dt  # HAZARD: python-scalar
        c1 = math.exp(-self.friction * dt)
        sigma_v = math.sqrt(self.kT)  # CLEAN: the bath temperature is fixed for the whole run
        c2 = math.sqrt(1.0 - c1 * c1) * sigma_v
        self.vel.add_(0.5 * dt * self.forces * self.inv_m)
        self.pos.add_(dt * self.vel).remainder_(self.box)
        self.forces.copy_(self._forces(self.pos))
        self.vel.add_(0.5 * dt * self.forces * self.inv_m)
        drift = float(np.random.normal(0.0, 1e-4))  # HAZARD: host-code
        noise = torch.randn(self.vel.shape, device=self.vel.device, generator=self.noise_gen)  # HAZARD: rng
        self.vel.mul_(c1).add_(c2 * self.inv_m.sqrt() * noise + drift)
        self.ke.copy_(0.5 * (self.vel.pow(2) / self.inv_m).sum())
        if not torch.isfinite(self.ke):  # HAZARD: dynamic-control-flow
            raise FloatingPointError("integration blew up")

    def capture(self, warmup=3):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._step()

    def run(self, n_steps, log_every=500, traj=None):
        if self.graph is None:
            self.capture()
        for i in range(n_steps):
            self.graph.replay()
            if i % log_every == 0:
                ke = self.ke.item()  # CLEAN: read between replays, outside the capture
                if ke > 2.0 * self.target_ke:
                    self.dt *= 0.5
                if traj is not None:
                    traj.append(self.pos.detach().cpu())
