"""ETA service for a parcel network: per-bucket CUDA graphs behind a runner, congestion strategy injected."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

class CongestionStrategy:
    def scale(self, minutes):
        raise NotImplementedError

class DeviceCongestion(CongestionStrategy):
    def __init__(self, device="cuda"):
        self.factor = torch.ones(1, device=device)
    def scale(self, minutes):
        return minutes * self.factor  # CLEAN: device-side factor, refreshed with fill_
    def set_level(self, level):
        self.factor.fill_(level)  # CLEAN: in-place update of a tensor the graph reads

class RushHourCongestion(CongestionStrategy):
    def __init__(self):
        self.multiplier = 1.0
    def scale(self, minutes):
        m = self.multiplier  # HAZARD: python-scalar
        return minutes * m

class HostCalendar:
    def __init__(self):
        self.table = np.linspace(0.9, 1.25, 7, dtype=np.float32)
    def weights(self, device):
        return torch.from_numpy(self.table).to(device)  # HAZARD: pinned-memory

class DeviceCalendar:
    def __init__(self, device="cuda"):
        self.w = torch.from_numpy(np.linspace(0.9, 1.25, 7, dtype=np.float32)).to(device)  # CLEAN: uploaded once in __init__
    def weights(self, device):
        return self.w

class LegEncoder(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = nn.Linear(6, d)
        self.out = nn.Linear(d, 1)
    def forward(self, legs):
        return F.softplus(self.out(F.gelu(self.proj(legs)))).squeeze(-1)

class EtaModel(nn.Module):
    def __init__(self, d, strategy, calendar):
        super().__init__()
        self.legs = LegEncoder(d)
        self.strategy = strategy
        self.calendar = calendar
    def forward(self, legs, weekday, depots):
        minutes = self._minutes(legs, weekday)
        minutes = minutes + 0.1 * torch.cdist(legs[..., :2].mean(1), depots).min(-1).values
        return self._finalize(minutes)
    def _minutes(self, legs, weekday):
        return self._calendarize(self.legs(legs), weekday).sum(-1)
    def _calendarize(self, minutes, weekday):
        w = self.calendar.weights(minutes.device)
        return minutes * w[weekday]  # CLEAN: gather with a CUDA index tensor
    def _finalize(self, minutes):
        self._audit(minutes)
        return self.strategy.scale(minutes)
    def _audit(self, minutes):
        worst = minutes.max().item()  # HAZARD: host-sync
        self.late = worst > 600.0

class EtaGraphRunner:
    def __init__(self, model, buckets=(64, 256)):
        self.model, self.buckets = model.cuda().eval(), buckets
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.inputs, self.outputs = {}, {}, {}
        self.depots = torch.zeros(16, 2, device="cuda")
    @torch.no_grad()
    def capture_all(self):
        for b in self.buckets:
            legs = torch.zeros(b, 8, 6, device="cuda")
            wd = torch.zeros(b, 8, dtype=torch.long, device="cuda")
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    self.model(legs, wd, self.depots)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):  # CLEAN: warmed on a side stream; buckets share one pool
                self.outputs[b] = self.model(legs, wd, self.depots)
            self.graphs[b], self.inputs[b] = g, (legs, wd)
    def predict(self, legs, weekday):
        n = legs.shape[0]
        b = min(x for x in self.buckets if x >= n)
        static_legs, static_wd = self.inputs[b]
        static_legs[:n].copy_(legs)  # CLEAN: copy_ into the static input
        static_wd[:n].copy_(weekday)
        self.graphs[b].replay()
        return self.outputs[b][:n].clone()  # CLEAN: cloned before the next replay
    def refresh_depots(self, coords):
        self.depots = torch.as_tensor(coords, dtype=torch.float32, device="cuda")  # HAZARD: static-address
    def set_rush_hour(self, m):
        self.model.strategy.multiplier = m

def build_runner(kind):
    strategy = RushHourCongestion() if kind == "city" else DeviceCongestion()
    calendar = HostCalendar() if kind == "city" else DeviceCalendar()
    runner = EtaGraphRunner(EtaModel(64, strategy, calendar))
    runner.capture_all()
    return runner
