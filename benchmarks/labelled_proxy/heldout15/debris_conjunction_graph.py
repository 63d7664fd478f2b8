"""Conjunction screening of one protected LEO asset against the debris catalogue.

Two-body + J2 propagation with a learned acceleration residual (drag, SRP and
unmodelled perturbations), Monte-Carlo over the primary's covariance. The whole
screening window is one CUDA graph, replayed after each catalogue refresh.
"""
import numpy as np
import torch
import torch.nn as nn

MU = 398600.4418          # km^3/s^2
RE, J2 = 6378.137, 1.08263e-3


class ResidualAccel(nn.Module):
    def __init__(self, width=128):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(9, width), nn.SiLU(), nn.Linear(width, width), nn.SiLU(), nn.Linear(width, 3))

    def forward(self, r, v, eop):
        feat = torch.cat([r / RE, v / 7.5, eop.expand(r.shape[0], 3)], -1)
        return 1e-9 * self.net(feat)


def gravity(r):
    rn = r.norm(dim=-1, keepdim=True)
    z2 = (r[:, 2:3] / rn) ** 2
    k = 1.5 * J2 * (RE / rn) ** 2
    fac = torch.cat([1 + k * (1 - 5 * z2), 1 + k * (1 - 5 * z2), 1 + k * (3 - 5 * z2)], -1)
    return -MU * r / rn ** 3 * fac


class ConjunctionScreen:
    def __init__(self, resid, n_obj=8192, n_steps=240, dt=30.0, n_mc=64, k=32):
        self.resid = resid.cuda().eval()
        self.n_steps, self.dt, self.n_mc, self.k = n_steps, dt, n_mc, k
        self.catalog = torch.zeros(n_obj, 6, device="cuda")
        self.primary = torch.zeros(6, device="cuda")
        self.sigma_cat, self.sigma_pri = 0.15, 0.05          # km
        self.eop_np = np.zeros((1, 3), np.float32)           # polar motion x/y, UT1-UTC, refreshed daily
        self.cat_gen = torch.Generator(device="cuda")
        self.cat_gen.manual_seed(7)
        self.mc_gen = torch.Generator(device="cuda")
        self.mc_gen.manual_seed(11)
        self.tel = torch.cuda.Stream()
        self.miss_log = torch.zeros(n_obj, device="cuda")
        self.out_idx = torch.zeros(k, dtype=torch.long, device="cuda")
        self.out_miss = torch.zeros(k, device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    def _screen(self):
        eop = torch.from_numpy(self.eop_np).cuda(non_blocking=True)  # HAZARD: pinned-memory
        r, v = self.catalog[:, :3], self.catalog[:, 3:]
        r = r + self.sigma_cat * torch.randn(r.shape, device="cuda", generator=self.cat_gen)  # HAZARD: rng
        pr = self.primary[:3] + self.sigma_pri * torch.randn(self.n_mc, 3, device="cuda", generator=self.mc_gen)  # CLEAN: generator registered with the graph before capture
        pv = self.primary[3:].expand(self.n_mc, 3)
        miss = torch.full((r.shape[0],), 1e9, device="cuda")
        for _ in range(self.n_steps):
            v = v + self.dt * (gravity(r) + self.resid(r, v, eop))
            r = r + self.dt * v
            pv = pv + self.dt * (gravity(pr) + self.resid(pr, pv, eop))
            pr = pr + self.dt * pv
            miss = torch.minimum(miss, torch.cdist(pr, r).amin(0))
        torch.cuda.synchronize()  # HAZARD: host-sync
        with torch.cuda.stream(self.tel):  # HAZARD: stream
            self.miss_log.copy_(miss)
        top = torch.topk(-miss, k=self.k)  # CLEAN: fixed k, no data-dependent shape
        self.out_idx.copy_(top.indices)
        self.out_miss.copy_(-top.values)

    @torch.no_grad()
    def capture(self):
        self.graph.register_generator_state(self.mc_gen)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                self._screen()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self._screen()

    @torch.no_grad()
    def screen(self, catalog_np, primary_np):
        self.catalog.copy_(torch.from_numpy(catalog_np))  # CLEAN: pageable copy into the static input outside the capture
        self.primary.copy_(torch.from_numpy(primary_np))
        self.graph.replay()
        return self.out_idx.cpu().numpy(), self.out_miss.cpu().numpy()
