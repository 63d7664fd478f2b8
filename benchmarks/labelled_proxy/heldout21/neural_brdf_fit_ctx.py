"""Per-material neural BRDF fitting (Sztrajman et al. style) against MERL measurements.

Fitting all 100 MERL materials took hours because every step is a handful of tiny kernels,
so the whole training step is captured through a small `graph_capture` context manager
(warm-up on a side stream, then capture) and replayed 20k times per material.
"""
import contextlib
import math

import torch
import torch.nn as nn


@contextlib.contextmanager
def graph_capture(graph, warmup_fn, iters=3, pool=None):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # CLEAN: side stream forked before the warm-up and joined after it
        for _ in range(iters):
            warmup_fn()
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(graph, pool=pool):
        yield


class NBRDF(nn.Module):
    def __init__(self, hidden=21):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, 3))

    def forward(self, angles):                 # Rusinkiewicz (theta_h, theta_d, phi_d)
        return torch.exp(self.net(angles)) - 1  # reflectance >= -1 + eps, as in the paper


class BRDFFitter:
    def __init__(self, merl_table, batch=8192, device="cuda"):
        self.table = merl_table.to(device)                   # (90, 90, 180, 3) measured BRDF
        self.mlp = NBRDF().to(device)
        self.opt = torch.optim.Adam(self.mlp.parameters(), lr=5e-4)
        self.dir_gen = torch.Generator(device=device)
        self.dir_gen.manual_seed(0)
        self.batch, self.dev = batch, device
        self.loss = torch.zeros((), device=device)
        self.graph = torch.cuda.CUDAGraph()

    def _lookup(self, th_h, th_d, ph_d):
        i = (torch.sqrt(th_h / (math.pi / 2)) * 90).long().clamp(0, 89)
        j = (th_d / (math.pi / 2) * 90).long().clamp(0, 89)
        k = (ph_d / math.pi * 180).long().clamp(0, 179)
        return self.table[i, j, k]  # CLEAN: advanced indexing with CUDA index tensors, fixed shape

    def _step(self):
        u = torch.rand(self.batch, 3, device=self.dev, generator=self.dir_gen)  # HAZARD: rng
        th_h = u[:, 0] ** 2 * (math.pi / 2)                  # denser near the specular peak
        th_d, ph_d = u[:, 1] * (math.pi / 2), u[:, 2] * math.pi
        target = self._lookup(th_h, th_d, ph_d)
        jitter = 1e-3 * torch.randn(self.batch, 3, device=self.dev)  # CLEAN: default CUDA generator is captured with the graph
        pred = self.mlp(torch.stack([th_h, th_d, ph_d], -1) + jitter)
        cos_w = (torch.cos(th_h) * torch.cos(th_d)).clamp_min(0)[:, None]
        loss = (torch.log1p(pred * cos_w) - torch.log1p(target * cos_w)).abs().mean()
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.opt.step()  # HAZARD: optimizer
        self.loss.copy_(loss.detach())
        torch.cuda.empty_cache()  # HAZARD: memory

    def fit(self, steps=20_000):
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            with graph_capture(self.graph, self._step):
                self._step()
        for it in range(steps):
            self.graph.replay()
            if it % 2000 == 0:
                print(f"  {it:5d}  log-rel L1 {self.loss.item():.4f}")  # CLEAN: read after the replay
        return self.mlp


if __name__ == "__main__":
    from merl_io import MERL_NAMES, read_merl_binary

    for name in MERL_NAMES:
        print(name)
        table = torch.from_numpy(read_merl_binary(f"merl/{name}.binary")).float()
        mlp = BRDFFitter(table).fit()
        torch.save(mlp.state_dict(), f"nbrdf/{name}.pt")
