"""Reach & frequency planner for a video-ad buying tool.

For a campaign (a set of targeted audience segments, a CPM and a budget
grid) the model forecasts the unique-reach curve and the average frequency.
Media planners run it for every draft campaign; both forecasters are
compiled with reduce-overhead through a shared partial.
"""
import dataclasses
import functools
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("reach_planner")
rcompile = functools.partial(torch.compile, mode="reduce-overhead")
SEG_FEATS, GRID, MAX_SEG = 24, 32, 64


class ReachModel(nn.Module):
    def __init__(self, d=128):
        super().__init__()
        self.seg = nn.Sequential(nn.Linear(SEG_FEATS, d), nn.ReLU(), nn.Linear(d, d))
        self.curve = nn.Sequential(nn.Linear(d + 1, d), nn.ReLU(), nn.Linear(d, 2))

    def forward(self, seg_feats, seg_mask, log_impr):
        z = self.seg(seg_feats) * seg_mask[:, None]
        pooled = z.sum(0) / seg_mask.sum().clamp(min=1.0)
        h = torch.cat([pooled.expand(log_impr.shape[0], -1), log_impr[:, None]], -1)
        sat, rate = F.softplus(self.curve(h)).unbind(-1)
        return sat * (1 - torch.exp(-rate * log_impr.exp() / 1e6))


model = ReachModel().cuda().eval()


@rcompile
def reach_curve(seg_feats, seg_mask, budget_grid, cpm):
    impressions = budget_grid * 1000.0 / cpm  # HAZARD: python-scalar
    log.info("forecasting reach over %d segments", seg_feats.shape[0])  # HAZARD: host-code
    return model(seg_feats, seg_mask, torch.log(impressions))


@rcompile
def reach_curve_t(seg_feats, seg_mask, budget_grid, cpm_t):
    impressions = budget_grid * 1000.0 / cpm_t  # CLEAN: CPM passed as a 0-d tensor, no recompile when it changes
    return model(seg_feats, seg_mask, torch.log(impressions))


@dataclasses.dataclass
class DraftCampaign:
    name: str
    segments: torch.Tensor
    cpm: float
    budget_grid: torch.Tensor


def pad_segments(seg):
    mask = torch.zeros(MAX_SEG, device=seg.device)
    mask[: seg.shape[0]] = 1.0
    return F.pad(seg, (0, 0, 0, MAX_SEG - seg.shape[0])), mask


@torch.no_grad()
def plan_drafts(drafts):
    curves = []
    for d in drafts:
        mask = torch.ones(d.segments.shape[0], device="cuda")
        curve = reach_curve(d.segments, mask, d.budget_grid, d.cpm)  # HAZARD: dynamic-shape
        curves.append(curve)  # HAZARD: static-address
    return curves


@torch.no_grad()
def plan_drafts_padded(drafts):
    curves = []
    for d in drafts:
        seg, mask = pad_segments(d.segments)
        cpm = torch.tensor(d.cpm, device="cuda")
        curve = reach_curve_t(seg, mask, d.budget_grid, cpm)  # CLEAN: padded to MAX_SEG, one graph
        curves.append(curve.clone())  # CLEAN: cloned before the next replay
    return curves


if __name__ == "__main__":
    grid = torch.linspace(1e3, 5e5, GRID, device="cuda")
    drafts = [DraftCampaign(f"draft-{i}", torch.randn(int(torch.randint(1, MAX_SEG, ())), SEG_FEATS, device="cuda"),
                            float(torch.empty(()).uniform_(4.0, 30.0)), grid) for i in range(200)]
    quick = plan_drafts(drafts)
    final = plan_drafts_padded(drafts)
    best = max(range(len(final)), key=lambda i: float(final[i][-1]))
    print("best reach at max budget:", drafts[best].name)
