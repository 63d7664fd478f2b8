"""Sidewalk delivery robot: traversability segmentation with a deadline-driven fallback.

The perception node gets a stereo RGB frame + projected point cloud at 15 Hz. The full
model (compiled with mode="reduce-overhead") labels every pixel free / curb / obstacle and
lifts obstacle points into the local cost map. When the planner's 60 ms deadline is missed
twice in a row, the node degrades to a quarter-resolution eager model until it recovers.
"""
import time
from collections import deque

import torch
import torch.nn as nn
import torch.nn.functional as F

H, W = 320, 512
FREE, CURB, OBST = 0, 1, 2


class TravNet(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(4, width, 3, 2, 1), nn.ReLU(), nn.Conv2d(width, width, 3, 2, 1), nn.ReLU())
        self.dec = nn.Conv2d(width, 3, 1)

    def forward(self, rgbd):
        logits = F.interpolate(self.dec(self.enc(rgbd)), size=rgbd.shape[-2:], mode="bilinear")
        if torch.isnan(logits).any():  # HAZARD: dynamic-control-flow
            logits = torch.nan_to_num(logits)
        return logits


class TraversabilityNode:
    def __init__(self, dev="cuda"):
        self.dev = dev
        self.full = TravNet(64).to(dev).eval()
        self.small = TravNet(16).to(dev).eval()
        self.full_c = torch.compile(self.full, mode="reduce-overhead")
        self.late = 0
        self.masks = deque(maxlen=5)
        self.started = time.monotonic()

    def _full_pass(self, rgbd):
        return self.full_c(rgbd)

    @torch.no_grad()
    def on_frame(self, rgbd, points, deadline_s=0.060):
        t0 = time.monotonic()  # CLEAN: deadline measured in the eager node, outside the compiled model
        if self.late >= 2:
            small = F.interpolate(rgbd, scale_factor=0.25)
            labels = F.interpolate(self.small(small), size=(H, W)).argmax(1).flatten()  # CLEAN: eager fallback model
        else:
            logits = self._full_pass(rgbd)
            self.masks.append(logits)  # HAZARD: static-address
            labels = logits.argmax(1).flatten()
        obstacles = points[labels == OBST]  # CLEAN: eager mask index outside the compiled model
        self.late = self.late + 1 if time.monotonic() - t0 > deadline_s else 0
        return obstacles


@torch.compile(mode="reduce-overhead")
def lift_obstacles(logits, points, z_max):
    labels = logits.argmax(1).flatten()
    stamp = time.monotonic()  # HAZARD: host-code
    obst = points[(labels == OBST) & (points[:, 2] < z_max)]  # HAZARD: dynamic-shape
    return obst, stamp


@torch.compile(mode="reduce-overhead")
def curb_cost(logits, points):
    curb = (logits.argmax(1).flatten() == CURB).float()
    cost = torch.where(curb[:, None] > 0, points, torch.zeros_like(points))  # CLEAN: fixed-shape select, no mask index
    return cost.sum(0)


def costmap_update(node, grid, rgbd, points):
    with torch.no_grad():
        logits = node.full_c(rgbd).clone()  # CLEAN: cloned before the next compiled function runs
        obst = lift_obstacles(logits, points, 1.5)[0].cpu().numpy()
        c = curb_cost(logits, points).cpu().numpy()
    grid.mark(obst, c)
