"""Real-time bus arrival predictions for a city transit agency.

Each active trip is encoded with its remaining stops (padded to 32): scheduled segment
times, recent observed segment speeds and stop features. One model predicts running times,
another predicts dwell times; arrivals are the cumulative sum of both. The compile mode comes
from a dataclass config so the same code runs the live feed and the planners' preview tool.
"""
import logging
import time
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("eta")


@dataclass
class ETAConfig:
    compile_mode: str = "reduce-overhead"
    max_stops: int = 32
    n_feats: int = 12
    hidden: int = 128


class RunningTimeModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.gru = nn.GRU(cfg.n_feats + 2, cfg.hidden, batch_first=True)
        self.out = nn.Linear(cfg.hidden, 1)
        self.weather_factor = 1.0            # updated from the weather service every 10 min

    def forward(self, feats, sched_s):
        tod = (time.time() % 86400.0) / 86400.0  # HAZARD: host-code
        clock = torch.full_like(sched_s, tod)
        h, _ = self.gru(torch.cat([feats, sched_s[..., None] / 600.0, clock[..., None]], dim=-1))
        wf = self.weather_factor  # HAZARD: python-scalar
        run_s = sched_s * F.softplus(self.out(h).squeeze(-1)) * wf
        log.debug("running-time batch of %d trips", feats.shape[0])  # HAZARD: host-code
        return run_s


class DwellModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(cfg.n_feats, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, feats, stop_mask):
        return F.softplus(self.mlp(feats).squeeze(-1)) * stop_mask


class ArrivalService:
    def __init__(self, cfg: ETAConfig):
        self.cfg = cfg
        self.running = RunningTimeModel(cfg).cuda().eval()
        self.dwell = DwellModel(cfg).cuda().eval()
        self.run_c = torch.compile(self.running, mode=cfg.compile_mode)
        self.dwell_c = torch.compile(self.dwell, mode=cfg.compile_mode)

    @torch.no_grad()
    def predict(self, feats, sched_s, stop_mask):
        run_s = self.run_c(feats, sched_s)
        dwell_s = self.dwell_c(feats, stop_mask)
        arrival = torch.cumsum(run_s + dwell_s, dim=1)  # HAZARD: static-address
        return arrival.clone()

    @torch.no_grad()
    def predict_safe(self, feats, sched_s, stop_mask):
        run_s = self.run_c(feats, sched_s).clone()  # CLEAN: cloned before the dwell model runs
        dwell_s = self.dwell_c(feats, stop_mask)
        return torch.cumsum(run_s + dwell_s, dim=1)

    def pad(self, feats, sched_s):
        n = feats.shape[1]
        p = self.cfg.max_stops - n
        mask = torch.zeros(feats.shape[0], self.cfg.max_stops, device=feats.device)
        mask[:, :n] = 1.0
        return F.pad(feats, (0, 0, 0, p)), F.pad(sched_s, (0, p)), mask  # CLEAN: every call padded to max_stops


if __name__ == "__main__":
    live = ArrivalService(ETAConfig())
    preview = ArrivalService(ETAConfig(compile_mode="max-autotune-no-cudagraphs"))
    for tick in range(600):
        if tick % 20 == 0:
            live.running.weather_factor = 1.0 + 0.15 * ((tick // 20) % 3)
        feats = torch.randn(900, 20, 12, device="cuda")
        sched = torch.rand(900, 20, device="cuda") * 180
        f, s, m = live.pad(feats, sched)
        eta = live.predict(f, s, m)
        plan = preview.predict(f, s, m)  # CLEAN: no CUDA graphs in the preview config
    print(eta[0, :5].tolist(), plan[0, :5].tolist())
