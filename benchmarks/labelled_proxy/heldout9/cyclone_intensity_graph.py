"""Tropical-cyclone intensity estimation from geostationary IR imagery (Dvorak-style CNN).

Inputs are storm-centred brightness-temperature stacks of the last T scans. Intensity (kt) is
estimated with MC dropout for an uncertainty band; graphs are captured per storm-count bucket.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

T, HW = 8, 128


class IRNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(
            nn.Conv2d(2, 32, 5, 2, 2), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU(),
            nn.Conv2d(64, 96, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.head = nn.Linear(96 + 16, 1)

    def forward(self, ir, land, radial, keep):
        f = self.enc(torch.cat([ir, land.expand_as(ir)], dim=1)) * keep
        return self.head(torch.cat([f, radial], dim=1)).squeeze(-1)


class IntensityEstimator:
    def __init__(self, net, land_fraction, n_mc=8):
        self.net = net.cuda().eval()
        self.land_frac_np = land_fraction.astype(np.float32)    # HW x HW, regridded per storm
        self.n_mc = n_mc
        self.mc_gen = torch.Generator(device="cuda").manual_seed(3)
        self.stats_stream, self.aux_stream = torch.cuda.Stream(), torch.cuda.Stream()
        self.bt_mean = torch.full((), 250.0, device="cuda")
        self.graphs, self.io = {}, {}

    def _radial_profile(self, ir):
        r = torch.linspace(0, 1, 16, device=ir.device)
        grid_x = r.view(1, 1, 16, 1).expand(ir.shape[0], 8, 16, 1)
        theta = torch.linspace(0, 2 * np.pi, 9, device=ir.device)[:-1].view(1, 8, 1, 1)
        grid = torch.cat([grid_x * torch.cos(theta), grid_x * torch.sin(theta)], dim=-1)
        return F.grid_sample(ir, grid, align_corners=True).mean(dim=(1, 2))

    def _estimate(self, stack, valid):
        stack = stack.masked_fill(~valid[:, :, None, None], 0.0)  # CLEAN: masked_fill keeps the shape fixed
        n_valid = int(valid.sum(1).min())  # HAZARD: host-sync
        ir = stack[:, -max(n_valid, 1):].mean(1, keepdim=True)
        land = torch.as_tensor(self.land_frac_np, device="cuda")[None, None]  # HAZARD: pinned-memory
        self.aux_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.aux_stream):  # CLEAN: forked from and joined back to the capture stream
            radial = self._radial_profile(ir)
        torch.cuda.current_stream().wait_stream(self.aux_stream)
        p_keep = torch.full((ir.shape[0], 96), 0.9, device=ir.device)
        draws = []
        for _ in range(self.n_mc):
            keep = torch.bernoulli(p_keep, generator=self.mc_gen) / 0.9  # HAZARD: rng
            draws.append(self.net(ir, land, radial, keep))
        draws = torch.stack(draws, 1)
        with torch.cuda.stream(self.stats_stream):  # HAZARD: stream
            self.bt_mean.mul_(0.99).add_(0.01 * ir.mean())
        torch.cuda.empty_cache()  # HAZARD: memory
        return draws.mean(1), draws.std(1)

    @torch.no_grad()
    def capture(self, buckets=(4, 16)):
        pool = torch.cuda.graph_pool_handle()
        for b in buckets:
            stack = torch.full((b, T, HW, HW), 250.0, device="cuda")
            valid = torch.ones(b, T, dtype=torch.bool, device="cuda")
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(2):
                    self._estimate(stack, valid)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                out = self._estimate(stack, valid)
            self.graphs[b], self.io[b] = g, (stack, valid, out)

    def __call__(self, stack, valid):
        n = stack.shape[0]
        b = min(k for k in self.graphs if k >= n)
        s_in, v_in, (mean, std) = self.io[b]
        s_in[:n].copy_(stack)
        v_in[:n].copy_(valid)
        self.graphs[b].replay()
        return mean[:n].clone(), std[:n].clone()  # CLEAN: outputs cloned before the next replay
