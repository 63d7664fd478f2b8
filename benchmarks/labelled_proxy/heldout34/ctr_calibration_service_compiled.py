"""Ad click-through prediction with an injected calibrator and pacing policy, compiled with reduce-overhead."""
import torch
import torch.nn as nn

class Calibrator(nn.Module):
    def calibrate(self, logits):
        raise NotImplementedError

class PlattCalibrator(Calibrator):
    def __init__(self):
        super().__init__()
        self.temperature = 1.0
    def calibrate(self, logits):
        return torch.sigmoid(logits / self.temperature)  # HAZARD: python-scalar
    def refit(self, t):
        self.temperature = t

class BinnedCalibrator(Calibrator):
    def __init__(self, n_bins=32):
        super().__init__()
        self.register_buffer("table", torch.linspace(0.0, 1.0, n_bins))
    def calibrate(self, logits):
        idx = (torch.sigmoid(logits) * (self.table.numel() - 1)).long()
        return self.table[idx]  # CLEAN: gather with a device index tensor
    def refit(self, table):
        self.table.copy_(table)  # CLEAN: registered buffer updated in place

class PacingPolicy:
    def __init__(self, target_ctr):
        self.target = target_ctr
    def throttle(self, p):
        return p * self._ratio(p)
    def _ratio(self, p):
        observed = p.mean().item()  # HAZARD: host-sync
        return min(2.0, self.target / max(observed, 1e-6))

class NoPacing:
    def throttle(self, p):
        return p  # CLEAN: identity policy

class TowerModel(nn.Module):
    def __init__(self, n_feats=64, d=256):
        super().__init__()
        self.user = nn.Sequential(nn.Linear(n_feats, d), nn.ReLU(), nn.Linear(d, d))
        self.ad = nn.Sequential(nn.Linear(n_feats, d), nn.ReLU(), nn.Linear(d, d))
    def forward(self, u, a):
        return (self.user(u) * self.ad(a)).sum(-1) / 16.0

class CtrService(nn.Module):
    def __init__(self, towers, calibrator, pacing):
        super().__init__()
        self.towers, self.calibrator, self.pacing = towers, calibrator, pacing
    def forward(self, u, a):
        p = self.calibrator.calibrate(self.towers(u, a))
        return self._floor(self.pacing.throttle(p))
    def _floor(self, p):
        if (p < 1e-4).all():  # HAZARD: dynamic-control-flow
            return torch.full_like(p, 1e-4)
        return p

class AuctionFrontend:
    SLATE = 128
    def __init__(self, service):
        self.service = service.cuda().eval()
        self.predict = torch.compile(self.service, mode="reduce-overhead")
    @torch.no_grad()
    def score_slate(self, u, a):
        pad = self.SLATE - a.shape[0]
        a_full = torch.nn.functional.pad(a, (0, 0, 0, pad))
        u_full = u.expand(self.SLATE, -1)
        return self.predict(u_full, a_full)[: a.shape[0]].clone()  # CLEAN: padded to a fixed slate size
    @torch.no_grad()
    def score_raw(self, u, a):
        return self.predict(u.expand(a.shape[0], -1), a).clone()  # HAZARD: dynamic-shape

def serve(requests, daily_temps, paced=True):
    cal = PlattCalibrator()
    front = AuctionFrontend(CtrService(TowerModel(), cal, PacingPolicy(0.02) if paced else NoPacing()))
    out = []
    for day, reqs in enumerate(requests):
        cal.refit(daily_temps[day])
        for u, a, raw in reqs:
            u, a = u.cuda(), a.cuda()
            out.append(front.score_raw(u, a) if raw else front.score_slate(u, a))
    return out
