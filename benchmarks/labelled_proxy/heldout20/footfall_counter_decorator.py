"""Retail analytics: footfall counting at store entrances (ceiling cameras, virtual line).

Counting steps are wrapped with the analytics SDK's `@cuda_graphed` plugin decorator, which
captures the step on its first call and replays it on every later call.
"""
import functools
import time

import torch
import torch.nn as nn


def cuda_graphed(method):
    """Capture `method(self)` on first call; later calls replay.  Inputs live on `self`."""
    attr = f"_graph_{method.__name__}"

    @functools.wraps(method)
    def wrapper(self):
        if not hasattr(self, attr):
            g = torch.cuda.CUDAGraph()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.graph(g, stream=s):  # HAZARD: api-misuse
                out = method(self)
            torch.cuda.current_stream().wait_stream(s)
            setattr(self, attr, (g, out))
        g, out = getattr(self, attr)
        g.replay()
        return out
    return wrapper


class HeadDetector(nn.Module):
    def __init__(self, k=32):
        super().__init__()
        self.k = k
        self.net = nn.Sequential(nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(),
                                 nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(32, 1, 1))

    def forward(self, img):
        heat = torch.sigmoid(self.net(img)).flatten(1)
        score, idx = heat.topk(self.k, dim=1)  # CLEAN: fixed-k candidates, no data-dependent shape
        w = img.shape[-1] // 4
        xy = torch.stack([(idx % w).float(), (idx // w).float()], -1) * 4
        return xy, score


class EntranceCounter:
    def __init__(self, detector, line_y=240.0, hw=(480, 640)):
        self.det = detector.cuda().eval()
        self.line_y = line_y
        self.frame = torch.zeros(1, 3, *hw, device="cuda")
        self.prev_centroids = torch.zeros(1, detector.k, 2, device="cuda")
        self.count = 0
        self.hourly = {}

    @cuda_graphed
    @torch.no_grad()
    def step(self):
        xy, score = self.det(self.frame)
        d = torch.cdist(xy, self.prev_centroids)
        nn_d, nn_i = d.topk(1, dim=-1, largest=False)  # CLEAN: cdist + topk association, capturable
        prev = torch.gather(self.prev_centroids, 1, nn_i.expand(-1, -1, 2))
        crossed = (prev[..., 1] < self.line_y) & (xy[..., 1] >= self.line_y) & (score > 0.5) & (nn_d[..., 0] < 40)
        self.count += int(crossed.sum())  # HAZARD: host-sync
        self.hourly[time.strftime("%H")] = self.count  # HAZARD: host-code
        self.prev_centroids = xy  # HAZARD: static-address
        return crossed


def run_entrance(counter: EntranceCounter, frames):
    entered = torch.zeros((), device="cuda")
    for f in frames:
        counter.frame.copy_(f, non_blocking=True)  # CLEAN: frame written into the captured input
        crossed = counter.step()
        entered += crossed.sum()  # CLEAN: device-side accumulation, read once at the end
    return int(entered), counter.hourly
