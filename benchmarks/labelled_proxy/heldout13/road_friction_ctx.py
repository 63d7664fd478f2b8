"""Winter road-surface grip estimation at road-weather information stations (RWIS):
a camera crop per lane + IR surface temperature, dew-point spread and water film
-> grip coefficient. Inference graphs are captured through a context manager.
"""
import contextlib
import logging

import torch
import torch.nn as nn

log = logging.getLogger("rwis")


@contextlib.contextmanager
def graph_capture(pool=None):
    """Yield a CUDAGraph being captured on a private side stream."""
    g = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        with torch.cuda.graph(g, pool=pool, stream=side):  # HAZARD: api-misuse
            yield g
    torch.cuda.current_stream().wait_stream(side)


class GripNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.cnn = nn.Sequential(
            nn.Conv2d(3, 32, 5, 2, 2), nn.ReLU(),
            nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.mlp = nn.Sequential(nn.Linear(64 + 3, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, crops, met):
        return 0.9 * torch.sigmoid(self.mlp(torch.cat([self.cnn(crops), met], -1))).squeeze(-1)


class StationEstimator:
    def __init__(self, net, lanes=4, device="cuda"):
        self.dev, self.lanes = device, lanes
        self.net = net.to(device).eval()
        self.jitter = torch.Generator(device=device)
        self.jitter.manual_seed(42)
        self.crops = torch.zeros(lanes, 3, 128, 128, device=device)
        self.met = torch.zeros(lanes, 3, device=device)  # surface T, dew-point spread, water film mm
        self.graph = None

    def _estimate(self):
        log.debug("grip estimate for station")  # CLEAN: plain-string log, nothing formatted
        gain = 1 + 0.05 * torch.rand(self.lanes, 1, 1, 1, device=self.dev, generator=self.jitter)  # HAZARD: rng
        mu = 0.5 * (self.net(self.crops, self.met) + self.net(self.crops * gain, self.met))
        log.debug(f"mean grip {mu.mean():.2f}")  # HAZARD: host-sync
        icy = mu[mu < 0.3]  # HAZARD: dynamic-shape
        warn = torch.where(mu < 0.3, torch.ones_like(mu), torch.zeros_like(mu))  # CLEAN: torch.where keeps the lane shape
        return mu, warn, icy

    def build(self):
        with torch.no_grad(), graph_capture() as g:
            self.out = self._estimate()
        self.graph = g

    def update(self, crops, met):
        self.crops.copy_(crops)  # CLEAN: in-place copy into the static input
        self.met.copy_(met)
        self.graph.replay()
        mu, warn, _ = self.out
        return mu.cpu(), warn.cpu()  # CLEAN: host copies after the replay, outside capture


if __name__ == "__main__":
    est = StationEstimator(GripNet())
    est.build()
    for ten_min in range(144):  # one day
        crops = torch.rand(4, 3, 128, 128, device="cuda")
        met = torch.stack([torch.full((4,), -3.0), torch.full((4,), 0.8), torch.rand(4) * 0.5], -1).cuda()
        mu, warn = est.update(crops, met)
        if warn.any():
            print(f"{ten_min * 10:4d} min: slippery lanes {warn.nonzero().flatten().tolist()} grip {mu.tolist()}")
