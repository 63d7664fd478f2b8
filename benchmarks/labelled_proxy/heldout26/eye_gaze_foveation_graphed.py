"""Binocular gaze estimation for foveated rendering on a VR headset.

The eye cameras run at 120 Hz; each frame pair goes through a gaze network graphed with
torch.cuda.make_graphed_callables, and the renderer moves the high-resolution inset to the
predicted fixation. A saccade detector on the CPU suppresses inset updates mid-saccade.
The per-user calibration (IPD, camera extrinsics) is redone whenever the headset is refitted.
"""
import collections

import numpy as np
import torch
import torch.nn as nn

EYE = 96


class GazeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1),
                                 nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(128 + 3, 3)
        self.blink = nn.Linear(128, 1)
        self.ipd_mm = 63.0
        self.calib_np = np.eye(3, dtype=np.float32)

    def forward(self, left, right):
        f = torch.cat([self.enc(left), self.enc(right)], -1)
        blink_prob = self.blink(f).sigmoid()
        if blink_prob.mean() > 0.5:  # HAZARD: dynamic-control-flow
            return torch.zeros(left.shape[0], 3, device=left.device)
        ipd = self.ipd_mm  # HAZARD: python-scalar
        calib = torch.as_tensor(self.calib_np, device=left.device)  # HAZARD: pinned-memory
        vergence = torch.full((left.shape[0], 3), ipd / 1000.0, device=left.device)
        gaze = self.head(torch.cat([f, vergence], -1)) @ calib.T
        gaze = torch.where(blink_prob > 0.9, torch.zeros_like(gaze), gaze)  # CLEAN: device-side select
        return nn.functional.normalize(gaze, dim=-1)


class FoveationService:
    def __init__(self, dev="cuda"):
        self.dev = dev
        self.net = GazeNet().to(dev)
        left = torch.randn(1, 1, EYE, EYE, device=dev)
        right = torch.randn(1, 1, EYE, EYE, device=dev)
        self.gaze = torch.cuda.make_graphed_callables(self.net, (left, right))
        self.net.register_forward_hook(self._count)  # CLEAN: hook registered after graphing
        self.history = collections.deque(maxlen=8)
        self.calls = 0
        self.inset = (0.5, 0.5)

    def _count(self, mod, inp, out):
        self.calls += 1

    def recalibrate(self, ipd_mm, extrinsics):
        self.net.ipd_mm = ipd_mm
        self.net.calib_np = extrinsics.astype(np.float32)

    def on_frames(self, left_u8, right_u8):
        left = left_u8.to(self.dev, non_blocking=True).float().div_(255)
        right = right_u8.to(self.dev, non_blocking=True).float().div_(255)
        g = self.gaze(left=left, right=right)  # HAZARD: api-misuse
        g_host = g.detach().cpu().numpy()[0]  # CLEAN: read back after the graphed call
        self.history.append(g_host)
        if self._saccade():
            return self.inset
        self.inset = (0.5 + 0.5 * g_host[0], 0.5 + 0.5 * g_host[1])
        return self.inset

    def on_frames_positional(self, left, right):
        return self.gaze(left, right).detach()  # CLEAN: positional tensors, as captured

    def _saccade(self, thr_deg=30.0):
        if len(self.history) < 2:
            return False
        a, b = self.history[-2], self.history[-1]
        ang = np.degrees(np.arccos(np.clip(np.dot(a, b), -1.0, 1.0))) * 120.0
        return ang > thr_deg

    def debug_capture(self, left, right):
        self.net.eval()
        with torch.no_grad():
            out = self.net(left, right)  # CLEAN: eval mode differs from capture, runs the eager forward
        self.net.train()
        return out
