"""Air-quality forecast from an ensemble of small temporal-conv members.

`predict` is rebound at start-up to a reduce-overhead compiled version. The number
of active members depends on the latency budget of each caller.
"""
import torch
import torch.nn as nn

MEMBERS = []
N_ACTIVE = 8
CLIP = 500.0  # ug/m3, physical upper bound of the PM2.5 sensors


class TCNMember(nn.Module):
    def __init__(self, n_feat=16, hidden=64, horizon=24, dilations=(1, 2, 4, 8)):
        super().__init__()
        layers, ch = [], n_feat
        for d in dilations:
            layers += [nn.Conv1d(ch, hidden, 3, padding=d, dilation=d), nn.GELU()]
            ch = hidden
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(hidden, horizon)

    def forward(self, x):  # (B, T, F)
        return self.head(self.body(x.transpose(1, 2))[..., -1])


def predict(x, stats):
    x.sub_(stats[0]).div_(stats[1])  # HAZARD: static-address
    outs = [m(x) for m in MEMBERS[:N_ACTIVE]]  # HAZARD: python-scalar
    y = torch.stack(outs) * stats[1, 0] + stats[0, 0]
    if torch.isnan(y).any():  # HAZARD: dynamic-control-flow
        raise FloatingPointError("ensemble member produced NaN")
    y = y.clamp(0.0, CLIP)  # CLEAN: module constant, never reassigned
    spread = y.std(0)
    worst = spread.max().item()  # HAZARD: host-sync
    return y.mean(0), spread, worst


def setup(checkpoints, mode="reduce-overhead"):
    global predict
    MEMBERS[:] = []
    for path in checkpoints:
        m = TCNMember()
        m.load_state_dict(torch.load(path, map_location="cpu"))
        MEMBERS.append(m.eval().cuda())
    predict = torch.compile(predict, mode=mode)


@torch.no_grad()
def forecast(x_hist, stats, latency_budget_ms):
    global N_ACTIVE
    N_ACTIVE = max(2, min(len(MEMBERS), int(latency_budget_ms // 3)))
    mean, spread, worst = predict(x_hist.clone(), stats)
    return mean.clone(), spread.clone(), worst  # CLEAN: outputs cloned before the next replay


def calibrate_spread(history, stats):
    ratios = []
    for x_hist, y_true in history:
        mean, spread, _ = forecast(x_hist, stats, latency_budget_ms=30)
        err = (mean - y_true).abs().mean()
        ratios.append((err / spread.mean().clamp_min(1e-6)).item())  # CLEAN: eager host read outside the compiled predict
    return sum(ratios) / len(ratios)
