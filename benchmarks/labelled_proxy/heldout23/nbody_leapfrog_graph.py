"""Direct-summation N-body (star cluster) with kick-drift-kick leapfrog.

Astro HPC style: one class holding all arrays, C-like loops, adaptive global
time step from the minimum crossing time, escapers removed for the bookkeeping.
"""
import time
import numpy as np
import torch

G_CONST = 1.0
EPS2 = 1.0e-4
R_ESC = 20.0


class Cluster:
    def __init__(self, n=16384, dev="cuda"):
        self.dev = dev
        rng = np.random.default_rng(42)
        x = rng.normal(size=(n, 3)).astype(np.float32)
        self.pos = torch.from_numpy(x).to(dev)
        self.vel = torch.zeros(n, 3, device=dev)
        self.mass = torch.full((n,), 1.0 / n, device=dev)
        self.dt = 1.0e-3
        self.t_wall = []
        self.escaped_mass = torch.zeros((), device=dev)
        self.energy = torch.zeros((), device=dev)
        self.diag = torch.cuda.Stream()
        self.graph = None

    def accel(self, pos):
        d = pos[None, :, :] - pos[:, None, :]
        r2 = (d * d).sum(-1) + EPS2
        inv3 = r2.rsqrt() ** 3
        return G_CONST * (d * (self.mass[None, :, None] * inv3[..., None])).sum(1)

    def kdk(self):
        dt = self.dt  # HAZARD: python-scalar
        self.vel.add_(0.5 * dt * self.accel(self.pos))
        self.pos.add_(dt * self.vel)
        self.vel.add_(0.5 * dt * self.accel(self.pos))
        r = self.pos.norm(dim=1)
        far = r > R_ESC
        escapers = self.mass[far]  # HAZARD: dynamic-shape
        self.escaped_mass.add_(escapers.sum())
        self.vel.mul_(torch.where(far, 0.0, 1.0)[:, None])  # CLEAN: torch.where, fixed shape
        self.t_wall.append(time.perf_counter())  # HAZARD: host-code
        with torch.cuda.stream(self.diag):  # HAZARD: stream
            ke = 0.5 * (self.mass * (self.vel ** 2).sum(1)).sum()
            self.energy.copy_(ke)

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.kdk()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):  # CLEAN: captured after a side-stream warm-up
            self.kdk()

    def potential(self):
        # eager diagnostic with a properly joined side stream
        cur = torch.cuda.current_stream()
        self.diag.wait_stream(cur)
        with torch.cuda.stream(self.diag):  # CLEAN: forked and joined, and not in a capture
            d = torch.cdist(self.pos, self.pos) + EPS2 ** 0.5
            w = -G_CONST * (self.mass[:, None] * self.mass[None, :]) / d
            pot = 0.5 * w.sum()
        cur.wait_stream(self.diag)
        return pot

    def adapt_dt(self):
        vmax = self.vel.norm(dim=1).max().item()  # CLEAN: eager, between replays
        self.dt = min(1e-3, 0.01 / max(vmax, 1e-6))

    def evolve(self, n_out=100, steps_per_out=50):
        self.capture()
        for k in range(n_out):
            for _ in range(steps_per_out):
                self.graph.replay()
            self.adapt_dt()
            print(k, float(self.potential()), self.escaped_mass.item())


if __name__ == "__main__":
    Cluster().evolve()
