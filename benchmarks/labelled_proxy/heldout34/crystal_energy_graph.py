"""Machine-learned interatomic energy for crystal relaxation screens; per-cell-size graphs, abstract cutoffs."""
import abc
import torch
import torch.nn as nn

class Cutoff(abc.ABC):
    def __init__(self, r_cut):
        self.r_cut = r_cut
    @abc.abstractmethod
    def envelope(self, d):
        ...
    def pair_terms(self, d):
        return self.envelope(d) * self._count_check(d)
    def _count_check(self, d):
        self.n_pairs = int((d < self.r_cut).sum())  # HAZARD: host-sync
        return 1.0

class CosineCutoff(Cutoff):
    def envelope(self, d):
        env = 0.5 * (torch.cos(torch.pi * d / self.r_cut) + 1.0)
        return env.masked_fill(d >= self.r_cut, 0.0)  # CLEAN: masked_fill keeps the shape

class SparseCutoff(Cutoff):
    def envelope(self, d):
        env = torch.zeros_like(d)
        inside = d < self.r_cut
        env[inside] = torch.exp(-d[inside] / self.r_cut)  # HAZARD: dynamic-shape
        return env

class GaussianRattle:
    def displace(self, pos):
        return pos + 0.01 * torch.randn_like(pos)  # CLEAN: default CUDA generator

class SeededRattle:
    def __init__(self, seed):
        self.gen = torch.Generator(device="cuda").manual_seed(seed)
    def displace(self, pos):
        return pos + 0.01 * torch.randn(pos.shape, device=pos.device, generator=self.gen)  # HAZARD: rng

class Descriptor:
    def __init__(self):
        self.side = torch.cuda.Stream()
    def radial(self, d, centers):
        with torch.cuda.stream(self.side):  # HAZARD: stream
            g = torch.exp(-(d.unsqueeze(-1) - centers) ** 2 / 0.1)
        return g

class EnergyModel(nn.Module):
    def __init__(self, cutoff, rattle, descriptor, n_rbf=32):
        super().__init__()
        self.cutoff, self.rattle, self.descriptor = cutoff, rattle, descriptor
        self.register_buffer("centers", torch.linspace(0.5, 6.0, n_rbf))
        self.mlp = nn.Sequential(nn.Linear(n_rbf, 64), nn.SiLU(), nn.Linear(64, 1))
    def forward(self, pos):
        p = self.rattle.displace(pos)
        d = torch.cdist(p, p) + torch.eye(p.shape[1], device=p.device) * 1e3
        g = self.descriptor.radial(d, self.centers) * self.cutoff.pair_terms(d).unsqueeze(-1)
        return self.mlp(g).sum((1, 2, 3))

class RelaxRunner:
    def __init__(self, model, sizes=(32, 64, 128), batch=16):
        self.model, self.graphs, self.io = model.cuda().eval(), {}, {}
        self.pool = torch.cuda.graph_pool_handle()
        for n in sizes:
            self.io[n] = {"pos": torch.zeros(batch, n, 3, device="cuda")}
    @torch.no_grad()
    def capture(self):
        for n, io in self.io.items():
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                self.model(io["pos"])
            torch.cuda.current_stream().wait_stream(s)
            self.graphs[n] = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graphs[n], pool=self.pool):  # CLEAN: warmed per size, shared pool
                io["energy"] = self.model(io["pos"])
    def energy(self, pos):
        io = self.io[pos.shape[1]]
        io["pos"].copy_(pos)  # CLEAN: copy_ into the static positions
        self.graphs[pos.shape[1]].replay()
        return io["energy"].clone()

def screen(structures, fast=True):
    cutoff = CosineCutoff(6.0) if fast else SparseCutoff(6.0)
    runner = RelaxRunner(EnergyModel(cutoff, SeededRattle(3) if fast else GaussianRattle(), Descriptor()))
    runner.capture()
    return [runner.energy(s.cuda()) for s in structures]
