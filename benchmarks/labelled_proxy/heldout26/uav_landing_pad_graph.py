"""Precision landing for an inspection UAV: landing-pad detection and a SEARCH -> APPROACH ->
DESCEND -> TOUCHDOWN state machine.

The flight companion computer runs the detector on the gimbal camera while searching and on
the downward camera once the pad is close. The detector graph is captured once per camera
(different intrinsics and resolution); the state machine runs on the host at 30 Hz and sends
velocity setpoints to the autopilot over MAVLink.
"""
import logging

import numpy as np
import torch
import torch.nn as nn

log = logging.getLogger("landing")


class PadNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU(),
                                  nn.Conv2d(64, 3, 1))

    def forward(self, img):
        out = self.body(img)
        return out[:, 0].sigmoid(), out[:, 1:]


class PadDetector:
    def __init__(self, dev="cuda"):
        self.dev = dev
        self.net = PadNet().to(dev).eval()
        self.graph = torch.cuda.CUDAGraph()
        self.reg_gen = torch.Generator(device=dev)
        self.camera = None

    def _detect(self):
        conf, offs = self.net(self.static_img)
        K = torch.tensor(self.K_np).cuda()  # HAZARD: pinned-memory
        peak = conf.flatten(1).amax(1)
        log.debug(f"pad peak confidence {peak}")  # HAZARD: host-sync
        if peak.max() > 0.6:  # HAZARD: dynamic-control-flow
            offs = offs.clamp(-1.0, 1.0)
        idx = conf.flatten(1).argmax(1)
        h, w = conf.shape[-2:]
        uv = torch.stack([idx % w, idx // w], -1).float() * 4.0
        ray = torch.cat([(uv + offs.flatten(2).mean(-1) - K[:2, 2]) / K.diagonal()[:2], torch.ones_like(uv[:, :1])], -1)
        jitter = torch.randn(ray.shape, device=self.dev, generator=self.reg_gen) * 1e-3  # CLEAN: generator registered below
        self.out = (ray + jitter, peak)
        return self.out

    def use_camera(self, name, K, shape):
        self.camera, self.K_np = name, K.astype(np.float32)
        self.static_img = torch.zeros(1, 3, *shape, device=self.dev)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.no_grad():
            for _ in range(3):
                self._detect()
        torch.cuda.current_stream().wait_stream(s)
        self.graph.register_generator_state(self.reg_gen)
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            with torch.no_grad(), torch.cuda.graph(self.graph):  # HAZARD: api-misuse
                self._detect()

    def detect(self, frame):
        self.static_img.copy_(frame)
        self.graph.replay()
        ray, peak = self.out
        return ray.cpu().numpy()[0], float(peak)  # CLEAN: read after replay, outside the capture


class LandingFSM:
    def __init__(self, det, mav):
        self.det, self.mav, self.state = det, mav, "SEARCH"
        det.use_camera("gimbal", np.eye(3) * [600, 600, 1], (480, 640))

    def tick(self, frames, altitude_m):
        ray, conf = self.det.detect(frames[self.det.camera])
        if self.state == "SEARCH" and conf > 0.6:
            self.state = "APPROACH"
        elif self.state == "APPROACH" and altitude_m < 8.0:
            self.det.use_camera("down", np.eye(3) * [320, 320, 1], (256, 320))
            self.state = "DESCEND"
        elif self.state == "DESCEND" and altitude_m < 0.3:
            self.state = "TOUCHDOWN"
        if conf < 0.2 and self.state != "SEARCH":
            log.warning("pad lost in %s, climbing", self.state)  # CLEAN: eager logging in the host state machine
            self.mav.velocity(0, 0, -0.5)
            return self.state
        self.mav.velocity(ray[0] * 0.5, ray[1] * 0.5, 0.4 if self.state == "DESCEND" else 0.0)
        return self.state
