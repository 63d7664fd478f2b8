"""Face-unlock liveness check (RGB + IR) for the companion-tablet firmware.

A two-stream CNN scores whether the face in front of the camera is live or a
print / replay / mask attack. The per-frame check is captured once at boot and
replayed for every frame of an unlock attempt (up to 12 frames).
"""
import logging
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("liveness")


def branch(c_in):
    return nn.Sequential(
        nn.Conv2d(c_in, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.AdaptiveAvgPool2d(4),
    )


class TwoStream(nn.Module):
    def __init__(self):
        super().__init__()
        self.rgb, self.ir = branch(3), branch(1)
        self.head = nn.Linear(2 * 64 * 16, 1)

    def forward(self, rgb, ir):
        return self.head(torch.cat([self.rgb(rgb).flatten(1), self.ir(ir).flatten(1)], 1)).squeeze(-1)


class LivenessChecker:
    def __init__(self, net, ir_flatfield_np, session_seed, device="cuda"):
        self.net = net.eval().to(device)
        self.device = device
        self.ir_flatfield_np = ir_flatfield_np.astype(np.float32)  # per-unit IR calibration from /persist
        self.session_seed = session_seed
        self.rgb = torch.zeros(1, 3, 112, 112, device=device)
        self.ir = torch.zeros(1, 1, 112, 112, device=device)
        self.graph = torch.cuda.CUDAGraph()
        self.t_start = 0.0

    def _jitter(self, x):
        torch.manual_seed(self.session_seed)  # HAZARD: rng
        theta = torch.eye(2, 3, device=self.device).unsqueeze(0)
        theta = theta + 0.02 * torch.randn(1, 2, 3, device=self.device)
        return F.grid_sample(x, F.affine_grid(theta, list(x.shape), align_corners=False), align_corners=False)

    def _check(self):
        elapsed_ms = (time.perf_counter() - self.t_start) * 1e3  # HAZARD: host-code
        ir = self.ir * torch.from_numpy(self.ir_flatfield_np).to(self.device, non_blocking=True)  # HAZARD: pinned-memory
        score = torch.sigmoid(self.net(self._jitter(self.rgb), ir))
        log.debug(f"frame score {score[0]:.3f} after {elapsed_ms:.1f} ms")  # HAZARD: host-sync
        live = torch.where(score > 0.8, torch.ones_like(score), torch.zeros_like(score))  # CLEAN: torch.where, no host read
        return score, live

    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._check()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            log.info("capturing liveness graph")  # CLEAN: plain-string log, no tensor is formatted
            self.score, self.live = self._check()

    def new_session(self):
        self.session_seed = int.from_bytes(np.random.bytes(4), "little")

    def attempt(self, frames):
        self.t_start = time.perf_counter()  # CLEAN: host clock read outside the graph
        votes = 0
        for rgb, ir in frames:
            self.rgb.copy_(rgb)
            self.ir.copy_(ir)
            self.graph.replay()
            votes += int(self.live.item())  # CLEAN: host read after the replay
        return votes >= 0.75 * len(frames)


if __name__ == "__main__":
    net = TwoStream()
    net.load_state_dict(torch.load("liveness_twostream.pt", map_location="cpu"))
    checker = LivenessChecker(net, np.load("/persist/ir_flatfield.npy"), session_seed=0)
    checker.capture()
