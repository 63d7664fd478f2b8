"""Coarse-grained polymer melt MD with a learned bead potential; velocity-Verlet step captured as one graph."""
from dataclasses import dataclass, field
import numpy as np
import torch
import torch.nn as nn

@dataclass
class Integrator:
    dt: float = 0.005
    gamma: float = 0.5
    kT: torch.Tensor = field(default_factory=lambda: torch.ones((), device="cuda"))
    def half_kick(self, v, f):
        return v + 0.5 * self.dt * f  # HAZARD: python-scalar
    def drift(self, x, v):
        return x + 0.005 * v  # CLEAN: literal constant timestep
    def thermostat(self, v):
        c = torch.exp(torch.tensor(-0.5, device=v.device) * 0.005)  # HAZARD: host-sync
        noise = torch.randn_like(v)  # CLEAN: default CUDA generator
        return c * v + torch.sqrt((1 - c ** 2) * self.kT) * noise
    def retune(self, max_force):
        self.dt = 0.005 if max_force < 50.0 else 0.002

@dataclass
class Box:
    lengths: np.ndarray
    def wrap(self, x):
        L = torch.from_numpy(self.lengths).to(x.device)  # HAZARD: pinned-memory
        return x - L * torch.floor(x / L)

class BeadPotential(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.phi = nn.Sequential(nn.Linear(1, d), nn.SiLU(), nn.Linear(d, 1))
    def forward(self, x):
        r = torch.cdist(x, x) + 10.0 * torch.eye(x.shape[1], device=x.device)
        return self.phi(r.unsqueeze(-1)).sum()

class Forces:
    def __init__(self, potential, seed=0):
        self.potential, self.seed = potential, seed
    def __call__(self, x):
        x = x.detach().requires_grad_(True)
        e = self.potential(x)
        return -torch.autograd.grad(e, x)[0], e.detach()
    def perturb(self, x, scale):
        torch.cuda.manual_seed(self.seed)  # HAZARD: rng
        return x + scale * torch.randn_like(x)

class Simulation:
    def __init__(self, integrator, box, forces, n=512):
        self.int, self.box, self.forces = integrator, box, forces
        self.x = torch.rand(1, n, 3, device="cuda") * 10.0
        self.v = torch.zeros(1, n, 3, device="cuda")
        self.f, self.e = self.forces(self.x)
    def _kick_scale(self):
        return 1e-4 if np.random.rand() < 0.01 else 0.0  # HAZARD: host-code
    def step(self):
        v = self.int.half_kick(self.v, self.f)
        x = self.box.wrap(self.int.drift(self.x, v))
        x = self.forces.perturb(x, self._kick_scale())
        f, e = self.forces(x)
        v = self.int.thermostat(self.int.half_kick(v, f))
        self.x.copy_(x)  # CLEAN: state written back in place
        self.v.copy_(v)
        self.f.copy_(f)
        self.e.copy_(e)
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.step()
        torch.cuda.current_stream().wait_stream(s)
        self.g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.g):  # CLEAN: warmed on a side stream
            self.step()

def run(n_steps=100000, report=1000):
    integ = Integrator()
    sim = Simulation(integ, Box(np.array([10.0, 10.0, 10.0], dtype=np.float32)), Forces(BeadPotential().cuda()))
    sim.capture()
    for i in range(n_steps):
        sim.g.replay()
        if i % report == 0:
            integ.retune(float(sim.f.abs().max()))  # CLEAN: host read between replays
    return sim.x
