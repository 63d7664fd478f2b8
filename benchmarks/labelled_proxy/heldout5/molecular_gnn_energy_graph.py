"""SchNet-style interatomic potential; forces and line-search energies served with CUDA graphs."""
import math
import torch
import torch.nn as nn


class RBF(nn.Module):
    def __init__(self, n=32, cutoff=5.0):
        super().__init__()
        self.register_buffer("mu", torch.linspace(0, cutoff, n))
        self.gamma = 10.0 / cutoff

    def forward(self, d):
        return torch.exp(-self.gamma * (d[:, None] - self.mu) ** 2)


class Interaction(nn.Module):
    def __init__(self, dim, n_rbf):
        super().__init__()
        self.filt = nn.Sequential(nn.Linear(n_rbf, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.out = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim))

    def forward(self, h, rbf, src, dst, env):
        msg = h[src] * self.filt(rbf) * env[:, None]
        agg = torch.zeros_like(h).index_add_(0, dst, msg)  # CLEAN: index_add_ with device-side indices
        return h + self.out(agg)


class SchNet(nn.Module):
    def __init__(self, bond_list, dim=128, n_rbf=32, cutoff=5.0, n_layers=3):
        super().__init__()
        self.embed = nn.Embedding(100, dim)
        self.rbf = RBF(n_rbf, cutoff)
        self.layers = nn.ModuleList(Interaction(dim, n_rbf) for _ in range(n_layers))
        self.readout = nn.Sequential(nn.Linear(dim, dim // 2), nn.SiLU(), nn.Linear(dim // 2, 1))
        self.cutoff = cutoff
        self.bond_list = bond_list  # list of (i, j) pairs read from the topology file

    def energy(self, z, pos, batch):
        src, dst = torch.tensor(self.bond_list, device=pos.device).t()  # HAZARD: host-sync
        d = (pos[src] - pos[dst]).norm(dim=-1)
        env = 0.5 * (torch.cos(d * math.pi / self.cutoff) + 1.0)  # CLEAN: cutoff fixed at construction
        h = self.embed(z)
        for layer in self.layers:
            h = layer(h, self.rbf(d), src, dst, env)
        n_mol = int(batch.max()) + 1  # HAZARD: host-sync
        e_atom = self.readout(h).squeeze(-1)
        return torch.zeros(n_mol, device=pos.device).index_add_(0, batch, e_atom)


class GraphRelaxer:
    def __init__(self, model, z, pos, batch, step_size=0.01):
        self.model, self.z, self.batch = model, z, batch
        self.pos = pos.clone().requires_grad_(True)
        self.trial_pos = pos.clone()
        self.step_size = step_size
        self.pool = torch.cuda.graph_pool_handle()
        self.side = torch.cuda.Stream()

    def _forces(self):
        e = self.model.energy(self.z, self.pos, self.batch)
        return e, -torch.autograd.grad(e.sum(), self.pos)[0]

    def capture(self):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            for _ in range(3):
                self._forces()
            self.g_force = torch.cuda.CUDAGraph()
            self.g_force.capture_begin(pool=self.pool)  # CLEAN: capture_begin inside a side-stream context
            self.e, self.f = self._forces()
            self.g_force.capture_end()
        torch.cuda.current_stream().wait_stream(self.side)

        with torch.no_grad():
            for _ in range(2):
                self.model.energy(self.z, self.trial_pos, self.batch)
            self.g_energy = torch.cuda.CUDAGraph()
            self.g_energy.capture_begin(pool=self.pool)  # HAZARD: stream
            self.e_trial = self.model.energy(self.z, self.trial_pos, self.batch)
            print(f"line-search energy {self.e_trial.sum()}")  # HAZARD: host-sync
            self.g_energy.capture_end()

    def relax(self, n_steps=200):
        step = self.step_size
        for _ in range(n_steps):
            self.g_force.replay()
            with torch.no_grad():
                self.trial_pos.copy_(self.pos + step * self.f.clamp(-1.0, 1.0))
            self.g_energy.replay()
            if (self.e_trial < self.e).all():  # CLEAN: branch on graph outputs after replay, outside both graphs
                with torch.no_grad():
                    self.pos.copy_(self.trial_pos)
                step = min(step * 1.1, 0.1)
            else:
                step *= 0.5
        return self.pos.detach(), self.e.detach()
