"""Container pre-warming for a serverless platform: forecast next-minute invocations per function.

Each region runs a Prewarmer; the compile mode comes from a dataclass config
(reduce-overhead in production, no CUDA graphs in staging).
"""
import math
import time
from dataclasses import dataclass

import torch
import torch.nn as nn


@dataclass
class ServeConfig:
    mode: str = "reduce-overhead"
    history_min: int = 120
    bucket: int = 4096            # functions per scoring call


@dataclass
class StagingConfig(ServeConfig):
    mode: str = "max-autotune-no-cudagraphs"


class InvocationForecaster(nn.Module):
    def __init__(self, hist=120, d=64):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(hist, 256), nn.GELU(), nn.Linear(256, d))
        self.tod = nn.Linear(2, d)
        self.out = nn.Linear(d, 1)
        self.tz_offset_h = 0          # region's offset from UTC
        self.last_peak = 0

    def forward(self, counts):        # [N, hist] invocations per minute
        now_h = time.time() / 3600.0  # HAZARD: host-code
        local_h = (now_h + self.tz_offset_h) % 24.0  # HAZARD: python-scalar
        ang = torch.full((counts.shape[0], 1), 2 * math.pi * local_h / 24.0, device=counts.device)
        z = self.enc(torch.log1p(counts)) + self.tod(torch.cat([ang.sin(), ang.cos()], -1))
        pred = torch.expm1(self.out(z).squeeze(-1)).clamp_min(0.0)
        self.last_peak = int(pred.max().ceil())  # HAZARD: host-sync
        return pred


class Prewarmer:
    def __init__(self, model, cfg: ServeConfig):
        self.cfg = cfg
        self.model = torch.compile(model, mode=cfg.mode)

    @torch.no_grad()
    def plan(self, counts):
        n = counts.shape[0]
        padded = counts.new_zeros(self.cfg.bucket, counts.shape[1])
        padded[:n] = counts
        pred = self.model(padded)[:n]  # CLEAN: padded to the configured bucket
        return torch.ceil(pred * 1.2).long()

    @torch.no_grad()
    def plan_exact(self, counts):
        return torch.ceil(self.model(counts) * 1.2).long()  # HAZARD: dynamic-shape


def run_regions(model, regions, feed):
    live = Prewarmer(model, ServeConfig())
    for region in regions:
        model.tz_offset_h = region.utc_offset_h
        counts = feed.recent_counts(region).cuda()       # only the functions active in this region
        if region.tier == "premium":
            warm = live.plan(counts)
        else:
            warm = live.plan_exact(counts)
        feed.apply(region, warm.cpu())


def staging_replay(model, recorded):
    staging = Prewarmer(model, StagingConfig())
    return [staging.model(c.cuda()) for c in recorded]  # CLEAN: staging config compiles without CUDA graphs, any size is fine
