"""Freight brokerage: truckload spot-rate model (lane, equipment, lead time, market
tightness), retrained weekly.  Compiled through the platform's CompileProfile factory.
"""
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class CompileProfile:
    mode: str = "max-autotune"
    dynamic: bool = False


PROFILES = {"train": CompileProfile(), "eval": CompileProfile(mode="default", dynamic=True)}


def compiled(obj, profile: str):
    return torch.compile(obj, **asdict(PROFILES[profile]))


class SpotRateNet(nn.Module):
    def __init__(self, n_lanes=12_000, n_feat=40, hid=256):
        super().__init__()
        self.lane = nn.Embedding(n_lanes, 32)
        self.mlp = nn.Sequential(nn.Linear(n_feat + 33, hid), nn.SiLU(), nn.Linear(hid, hid), nn.SiLU(),
                                 nn.Linear(hid, 1))
        self.register_buffer("diesel_index", torch.ones(1))  # weekly DOE diesel index, normalised

    def forward(self, lane_id, x):
        fuel = self.diesel_index.expand(x.shape[0], 1)
        return self.mlp(torch.cat([x, self.lane(lane_id), fuel], -1)).squeeze(-1)


def rate_loss(model, lane_id, x, y):
    pred = model(lane_id, x)
    loss = F.huber_loss(pred, y, delta=50.0)
    if torch.isnan(loss):  # HAZARD: dynamic-control-flow
        loss = torch.zeros_like(loss)
    return loss


class WeeklyRetrain:
    def __init__(self, model: SpotRateNet):
        self.model = model.cuda()
        self.loss_fn = compiled(rate_loss, "train")
        self.eval_fn = compiled(rate_loss, "eval")
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01)
        self.opt_step = compiled(self.opt.step, "train")
        self.week_lrs = [1e-3 * 0.9 ** k for k in range(20)]

    def update_fuel(self, index_value: float):
        self.model.diesel_index = torch.tensor([index_value], device="cuda")  # HAZARD: static-address

    def set_week_lr(self, week: int):
        for g in self.opt.param_groups:
            g["lr"] = self.week_lrs[min(week, 19)]  # HAZARD: optimizer

    def train_week(self, week: int, lane_batches):
        self.set_week_lr(week)
        last = None
        # batches are grouped by lane, so their sizes follow each lane's load volume
        for lane_id, x, y in lane_batches:
            loss = self.loss_fn(self.model, lane_id, x, y)  # HAZARD: dynamic-shape
            last = loss.detach().clone()  # CLEAN: loss cloned before backward and the compiled optimizer step
            loss.backward()
            self.opt_step()
            self.opt.zero_grad(set_to_none=True)
        return float(last)  # CLEAN: host read of the clone, in eager code

    @torch.no_grad()
    def evaluate(self, lane_batches):
        return [self.eval_fn(self.model, l, x, y).item() for l, x, y in lane_batches]  # CLEAN: default-mode compile, no CUDA graphs


def run_season(model, weeks, diesel_by_week, eval_batches):
    job = WeeklyRetrain(model)
    history = []
    for week, batches in enumerate(weeks):
        job.update_fuel(diesel_by_week[week])
        history.append((job.train_week(week, batches), job.evaluate(eval_batches)))
    return history
