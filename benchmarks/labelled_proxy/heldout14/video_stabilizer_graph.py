"""Streaming stabilisation for the 'smooth my clip' button of a phone-video editor backend.

A small CNN estimates the affine motion between consecutive grey frames, the camera
path is smoothed over a 31-frame window and every frame is re-warped. Frames arrive
one at a time, so the whole per-frame pipeline is one CUDA graph.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("stabilizer")
WINDOW = 31


def gaussian_kernel(n, sigma):
    t = torch.arange(n, dtype=torch.float32) - n // 2
    k = torch.exp(-0.5 * (t / sigma) ** 2)
    return k / k.sum()


class MotionNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(
            nn.Conv2d(2, 32, 5, 2, 2), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU(),
            nn.Conv2d(64, 128, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(128, 6)

    def forward(self, prev, cur):
        return self.fc(self.enc(torch.cat([prev, cur], 1)).flatten(1)).view(-1, 2, 3)


class Stabilizer:
    def __init__(self, net, h=720, w=1280, crop=0.9, device="cuda"):
        self.net = net.eval().to(device)
        self.prev = torch.zeros(1, 1, h // 4, w // 4, device=device)
        self.cur = torch.zeros_like(self.prev)
        self.rgb = torch.zeros(1, 3, h, w, device=device)
        self.traj = torch.zeros(WINDOW, 6, device=device)
        self.kernel = gaussian_kernel(WINDOW, 8.0).to(device)
        self.identity = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]], device=device)  # CLEAN: built once in __init__, outside the capture
        self.zoom = torch.tensor([[[crop, crop, 1.0], [crop, crop, 1.0]]], device=device)
        self.cut_thresh = 0.35
        self.side = torch.cuda.Stream()
        self._warmup()
        with torch.no_grad():
            self.g = torch.cuda.CUDAGraph()
            self.g.capture_begin()  # HAZARD: stream
            self.out = self._frame()
            self.g.capture_end()
            self.thumb_g = torch.cuda.CUDAGraph()
            self.side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.side):
                self.thumb_g.capture_begin()  # CLEAN: begun inside a side-stream context
                self.thumb = F.interpolate(self.out, scale_factor=0.25, mode="bilinear")
                self.thumb_g.capture_end()
            torch.cuda.current_stream().wait_stream(self.side)
        log.info("stabiliser graphs captured")

    @torch.no_grad()
    def _warmup(self):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            for _ in range(3):
                F.interpolate(self._frame(), scale_factor=0.25, mode="bilinear")
        torch.cuda.current_stream().wait_stream(self.side)

    def _frame(self):
        motion = (self.net(self.prev, self.cur) - self.identity).flatten()
        if motion.abs().max() > self.cut_thresh:  # HAZARD: dynamic-control-flow
            self.traj.zero_()  # scene cut: start a new camera path
        self.traj = torch.cat([self.traj[1:], (self.traj[-1] + motion)[None]])  # HAZARD: static-address
        smooth = (self.kernel[:, None] * self.traj).sum(0)
        corr = self.identity + (smooth - self.traj[-1]).view(1, 2, 3)
        log.debug(f"frame correction {corr.abs().max():.4f}")  # HAZARD: host-sync
        grid = F.affine_grid(corr * self.zoom, list(self.rgb.shape), align_corners=False)
        return F.grid_sample(self.rgb, grid, align_corners=False)  # CLEAN: grid_sample on static buffers is capturable

    @torch.no_grad()
    def push(self, grey_small, rgb):
        self.prev.copy_(self.cur)  # CLEAN: in-place shift of the static inputs
        self.cur.copy_(grey_small)
        self.rgb.copy_(rgb)
        self.g.replay()
        self.thumb_g.replay()
        return self.out.clone(), self.thumb.clone()


def stabilize_clip(stab, frames):
    out = []
    for rgb in frames:
        grey = F.interpolate(rgb.mean(1, keepdim=True), scale_factor=0.25, mode="area")
        full, _ = stab.push(grey, rgb)
        out.append(full)
    return torch.cat(out)
