"""Neural signed-distance field: mesh extraction and sphere-traced previews.

A trained SDF MLP is queried on a dense grid for marching cubes and sphere
traced for thumbnails.  Queries go through compiled lambdas/methods.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class SDFNet(nn.Module):
    def __init__(self, n_freqs=6, width=256, depth=8):
        super().__init__()
        self.register_buffer("freqs", 2.0 ** torch.arange(n_freqs) * math.pi)
        in_ch = 3 + 6 * n_freqs
        layers = [nn.Linear(in_ch, width)] + [nn.Linear(width, width) for _ in range(depth - 2)]
        self.layers = nn.ModuleList(layers)
        self.out = nn.Linear(width, 1)

    def forward(self, p):
        ang = p[..., None] * self.freqs
        h = torch.cat([p, ang.sin().flatten(-2), ang.cos().flatten(-2)], -1)
        for lin in self.layers:
            h = F.softplus(lin(h), beta=100)
        return self.out(h)


class SDFQueryEngine:
    def __init__(self, net: SDFNet):
        self.net = net.cuda().eval()
        self.sdf = torch.compile(lambda p: self.net(p).squeeze(-1), mode="reduce-overhead")
        self.trace = torch.compile(self._sphere_trace, mode="reduce-overhead")
        self.trace_preview = torch.compile(self._sphere_trace_coarse)

    def _sphere_trace(self, o, d, eps=1e-4, max_iter=64):
        t = torch.zeros(o.shape[:-1], device=o.device)
        dist = self.net(o).squeeze(-1)
        it = 0
        while (dist.abs() > eps).any() and it < max_iter:  # HAZARD: dynamic-control-flow
            t = t + dist
            dist = self.net(o + t[..., None] * d).squeeze(-1)
            it += 1
        return t, dist.abs() < 1e-3

    def _sphere_trace_coarse(self, o, d, eps=1e-2, max_iter=16):
        t = torch.zeros(o.shape[:-1], device=o.device)
        dist = self.net(o).squeeze(-1)
        it = 0
        while (dist.abs() > eps).any() and it < max_iter:  # CLEAN: default torch.compile, no CUDA graphs
            t = t + dist
            dist = self.net(o + t[..., None] * d).squeeze(-1)
            it += 1
        return t, dist.abs() < 1e-2

    @torch.no_grad()
    def grid_values(self, res=256, chunk=65536, bound=1.0):
        ax = torch.linspace(-bound, bound, res, device="cuda")
        pts = torch.stack(torch.meshgrid(ax, ax, ax, indexing="ij"), -1).view(-1, 3)
        n = pts.shape[0]
        pts = F.pad(pts, (0, 0, 0, (-n) % chunk))  # CLEAN: last chunk padded so every call has the same shape
        chunks = []
        for i in range(0, pts.shape[0], chunk):
            chunks.append(self.sdf(pts[i:i + chunk]))  # HAZARD: static-address
        return torch.cat(chunks)[:n].view(res, res, res).cpu()  # CLEAN: host copy in eager code, outside the compiled lambda

    @torch.no_grad()
    def refine_surface(self, pts, band=0.01, step=0.5):
        vals = self.sdf(pts)
        near = pts[vals.abs() < band]
        near_vals = self.sdf(near)  # HAZARD: dynamic-shape
        eps = 1e-4
        grads = torch.stack([(self.net(near + eps * e).squeeze(-1) - near_vals) / eps
                             for e in torch.eye(3, device="cuda")], -1)
        return near - step * near_vals[:, None] * F.normalize(grads, dim=-1)

    @torch.no_grad()
    def thumbnail(self, cam_o, cam_d, preview=False):
        fn = self.trace_preview if preview else self.trace
        t, hit = fn(cam_o, cam_d)
        return torch.where(hit, t, torch.full_like(t, float("inf")))
