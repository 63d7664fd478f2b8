"""NeRF training step (ray sampling, MLP, compositing, Adam) captured as one CUDA graph.

The data loader writes a fresh ray batch into the static ray buffers before every
replay; everything else stays on the GPU.
"""
import math
import random

import torch
import torch.nn as nn
import torch.nn.functional as F


class RadianceMLP(nn.Module):
    def __init__(self, n_freqs=10, width=256):
        super().__init__()
        self.n_freqs = n_freqs
        in_ch = 3 + 3 * 2 * n_freqs
        self.trunk = nn.Sequential(nn.Linear(in_ch, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU())
        self.sigma = nn.Linear(width, 1)
        self.rgb = nn.Linear(width, 3)
        self.noise_std = 1.0
        self.step = 0

    def encode(self, p):
        bands = 2.0 ** torch.arange(self.n_freqs, device=p.device)
        ang = p[..., None] * bands
        return torch.cat([p, ang.sin().flatten(-2), ang.cos().flatten(-2)], -1)

    def forward(self, pts):
        h = self.trunk(self.encode(pts))
        sigma = self.sigma(h).squeeze(-1)
        std = self.noise_std * max(0.0, 1.0 - self.step / 5000)  # HAZARD: python-scalar
        sigma = sigma + std * torch.randn_like(sigma)
        return F.relu(sigma), torch.sigmoid(self.rgb(h))


class RayMarchTrainer:
    def __init__(self, model: RadianceMLP, n_rays=4096, n_coarse=64, near=2.0, far=6.0, seed=0):
        self.model = model.cuda().train()
        self.n_rays, self.nc, self.near, self.far, self.seed = n_rays, n_coarse, near, far, seed
        self.jitter_gen = torch.Generator(device="cuda")
        self.bg_gen = torch.Generator(device="cuda")
        self.opt = torch.optim.Adam(model.parameters(), lr=5e-4, capturable=True)
        self.rays_o = torch.zeros(n_rays, 3, device="cuda")
        self.rays_d = torch.zeros(n_rays, 3, device="cuda")
        self.target = torch.zeros(n_rays, 3, device="cuda")
        self.graph = torch.cuda.CUDAGraph()
        self.loss = None

    def _sample(self):
        t = torch.linspace(self.near, self.far, self.nc, device="cuda").expand(self.n_rays, self.nc)
        u = torch.rand(self.n_rays, self.nc, device="cuda", generator=self.jitter_gen)  # CLEAN: generator registered with the graph before capture
        return t + u * (self.far - self.near) / self.nc

    def _composite(self, t, sigma, rgb):
        delta = torch.diff(t, dim=-1, append=t[..., -1:] + 1e10)
        alpha = 1.0 - torch.exp(-sigma * delta)
        trans = torch.cumprod(torch.cat([torch.ones_like(alpha[..., :1]), 1.0 - alpha + 1e-10], -1), -1)[..., :-1]
        w = alpha * trans
        bg = torch.rand(self.n_rays, 3, device="cuda", generator=self.bg_gen)  # HAZARD: rng
        return (w[..., None] * rgb).sum(-2) + (1.0 - w.sum(-1, keepdim=True)) * bg, w

    def _step(self):
        torch.manual_seed(self.seed * 100003 + self.model.step)  # HAZARD: rng
        t = self._sample()
        pts = self.rays_o[:, None] + self.rays_d[:, None] * t[..., None]
        sigma, rgb = self.model(pts)
        color, w = self._composite(t, sigma, rgb)
        picks = torch.multinomial(w.detach() + 1e-5, 16, replacement=True)  # CLEAN: multinomial on the default generator is capturable
        fine_t = torch.gather(t, 1, picks)
        exposure = 1.0 + 0.05 * random.uniform(-1.0, 1.0)  # HAZARD: host-code
        loss = F.mse_loss(color * exposure, self.target) + 1e-4 * sigma.gather(1, picks).mean() + 0.0 * fine_t.sum()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()  # CLEAN: Adam was built with capturable=True
        return loss.detach()

    def capture(self, warmup=3):
        self.graph.register_generator_state(self.jitter_gen)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(warmup):
                self._step()
                self.model.step += 1
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self.loss = self._step()

    def fit(self, loader, n_iters, lr_decay_steps=250_000):
        self.capture()
        for it, (o, d, rgb) in zip(range(n_iters), loader):
            self.rays_o.copy_(o, non_blocking=True)
            self.rays_d.copy_(d, non_blocking=True)
            self.target.copy_(rgb, non_blocking=True)
            self.graph.replay()
            self.model.step += 1
            for group in self.opt.param_groups:
                group["lr"] = 5e-4 * 0.1 ** (it / lr_decay_steps)  # HAZARD: optimizer
            if it % 1000 == 0:
                psnr = -10.0 * math.log10(max(self.loss.item(), 1e-10))  # CLEAN: host read between replays, outside the capture
                print(f"iter {it} psnr {psnr:.2f}")
