"""Fast closed-orbit feedback for an electron storage ring.

BPM readings -> corrector kicks through the SVD pseudo-inverse of the orbit
response matrix plus a learned residual for nonlinear optics. The correction runs
in a CUDA graph at 10 kHz; the response matrix changes with the working point.
"""
from dataclasses import dataclass

import torch
import torch.nn as nn


@dataclass
class FeedbackConfig:
    n_bpm: int = 224
    n_corr: int = 96
    gain: float = 0.4
    dither_urad: float = 0.05
    kick_limit_urad: float = 50.0


class OrbitFeedback:
    def __init__(self, R_pinv: torch.Tensor, cfg: FeedbackConfig, device="cuda"):
        self.cfg, self.dev = cfg, device
        self.R_pinv = R_pinv.clone().to(device)  # (n_corr, n_bpm)
        self.residual = nn.Sequential(
            nn.Linear(cfg.n_bpm, 256), nn.Tanh(), nn.Linear(256, cfg.n_corr)
        ).to(device).eval()
        self.dither_gen = torch.Generator(device=device)
        self.dither_gen.manual_seed(1234)
        self.limit = torch.full((cfg.n_corr,), cfg.kick_limit_urad, device=device)
        self.bpm = torch.zeros(cfg.n_bpm, device=device)
        self.kicks = torch.zeros(cfg.n_corr, device=device)
        self.pool = torch.cuda.graph_pool_handle()
        self.graph = torch.cuda.CUDAGraph()
        self.side = torch.cuda.Stream()
        self.telemetry = torch.cuda.Stream()
        self.kick_log = []

    def _correct(self):
        gain = self.cfg.gain  # HAZARD: python-scalar
        dk = -gain * (self.R_pinv @ self.bpm + self.residual(self.bpm))
        noise = torch.randn(self.cfg.n_corr, device=self.dev, generator=self.dither_gen)  # HAZARD: rng
        dk = dk + self.cfg.dither_urad * noise
        new = torch.clamp(self.kicks + dk, -self.limit, self.limit)  # CLEAN: clamp with tensor bounds stays on the device
        self.kicks.copy_(new)  # CLEAN: in-place update of the kick state
        with torch.cuda.stream(self.telemetry):  # HAZARD: stream
            rms = self.bpm.pow(2).mean().sqrt()
        self.kick_log.append(self.kicks.cpu().numpy())  # HAZARD: host-sync
        return rms

    @torch.no_grad()
    def set_optics(self, R_pinv):
        """Called at start-up and whenever the lattice (tunes, ID gaps) changes."""
        self.R_pinv.copy_(R_pinv)
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            for _ in range(3):
                self._correct()
        torch.cuda.current_stream().wait_stream(self.side)
        self.kicks.zero_()
        with torch.cuda.graph(self.graph, pool=self.pool):  # HAZARD: api-misuse
            self.rms = self._correct()

    def tick(self, bpm_um):
        self.bpm.copy_(bpm_um)
        self.graph.replay()
        return self.kicks


if __name__ == "__main__":
    cfg = FeedbackConfig()
    R = torch.randn(cfg.n_corr, cfg.n_bpm) * 0.01
    fb = OrbitFeedback(R, cfg)
    fb.set_optics(R)
    for turn in range(10_000):
        if turn == 2_000:
            cfg.gain = 0.25  # operator lowers the loop gain after an instability
        if turn == 6_000:
            fb.set_optics(R * 1.02)  # new working point after a tune change
        fb.tick(torch.randn(cfg.n_bpm, device="cuda"))
    print("final kick rms", fb.kicks.pow(2).mean().sqrt().item())  # CLEAN: host read after the replay
