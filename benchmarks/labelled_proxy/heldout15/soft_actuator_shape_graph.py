"""Proprioception for a soft pneumatic finger.

Twelve embedded liquid-metal strain gauges and the chamber pressure are mapped to
the curvature of eight constant-curvature segments, and from there to the tip
position. The estimator runs inside the sim-to-real rollout loop at 500 Hz, with
sensor-gain randomisation, so it is captured as one CUDA graph.
"""
import random

import torch
import torch.nn as nn

N_GAUGE, N_SEG, SEG_LEN = 12, 8, 0.012   # metres per segment


class ShapeNet(nn.Module):
    def __init__(self, history=16, width=256):
        super().__init__()
        self.mlp = nn.Sequential(
            nn.Linear(history * (N_GAUGE + 1), width), nn.Tanh(),
            nn.Linear(width, width), nn.Tanh(),
            nn.Linear(width, N_SEG),
        )

    def forward(self, x):
        return 60.0 * torch.tanh(self.mlp(x))        # curvature in 1/m


def tip_position(kappa):
    theta = torch.cumsum(kappa * SEG_LEN, dim=-1)
    x = torch.cumsum(SEG_LEN * torch.cos(theta), dim=-1)[..., -1]
    z = torch.cumsum(SEG_LEN * torch.sin(theta), dim=-1)[..., -1]
    return torch.stack([x, torch.zeros_like(x), z], -1)


class ShapeEstimator:
    def __init__(self, net, history=16, sat_limit=0.45):
        self.net = net.cuda().eval()
        self.hist = torch.zeros(1, history, N_GAUGE + 1, device="cuda")
        self.offset = torch.zeros(N_GAUGE, device="cuda")
        self.kappa = torch.zeros(1, N_SEG, device="cuda")
        self.tip = torch.zeros(1, 3, device="cuda")
        self.sat_level = torch.zeros((), device="cuda")
        self.sat_limit = sat_limit
        self.graph = torch.cuda.CUDAGraph()

    def _estimate(self):
        strain = self.hist[..., :N_GAUGE] - self.offset
        gain = random.uniform(0.95, 1.05)  # HAZARD: host-code
        over = strain[strain.abs() > self.sat_limit]  # HAZARD: dynamic-shape
        self.sat_level.copy_(over.abs().sum() / strain.numel())
        strain = torch.where(strain.abs() > self.sat_limit, strain.sign() * self.sat_limit, strain)  # CLEAN: masked clip with a fixed shape
        x = torch.cat([strain * gain, self.hist[..., N_GAUGE:]], -1).flatten(1)
        kappa = self.net(x)
        self.kappa.copy_(kappa)
        self.tip.copy_(tip_position(kappa.float()))

    @torch.autocast("cuda", dtype=torch.bfloat16)  # HAZARD: autocast-cache
    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._estimate()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):  # HAZARD: api-misuse
            self._estimate()

    def recalibrate(self, offsets, sat_limit):
        # new zero-strain offsets after the finger was re-inflated; the limit is a
        # Python float, so capture again to bake the new value in
        self.offset.copy_(offsets)  # CLEAN: offsets updated in place
        self.sat_limit = sat_limit
        self.capture()

    @torch.no_grad()
    def step(self, gauges, pressure):
        self.hist[:, :-1].copy_(self.hist[:, 1:].clone())
        self.hist[0, -1, :N_GAUGE].copy_(gauges)
        self.hist[0, -1, N_GAUGE].fill_(pressure)  # CLEAN: pressure written into the static input with fill_
        self.graph.replay()
        return self.kappa, self.tip


if __name__ == "__main__":
    est = ShapeEstimator(ShapeNet())
    est.capture()
    for t in range(1000):
        kappa, tip = est.step(torch.rand(N_GAUGE, device="cuda") * 0.3, 40.0 + 0.01 * t)
    est.recalibrate(torch.full((N_GAUGE,), 0.01, device="cuda"), 0.5)
    print(tip.cpu())
