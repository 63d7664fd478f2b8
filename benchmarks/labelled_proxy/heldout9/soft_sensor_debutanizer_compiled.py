"""Soft sensor for butane content at the bottom of a refinery debutanizer column.

Seven process variables (top temperature, pressure, reflux flow, flow to the next process,
tray temperatures) are sampled every minute; the gas-chromatograph value arrives only every
few hours, so the loss uses the lab-matched rows only. Functions are swapped for compiled
versions at start-up.
"""
import logging

import torch
import torch.nn as nn

log = logging.getLogger("softsensor")
N_PV, LAGS = 7, 13


class LagMLP(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(N_PV * LAGS, hidden), nn.Tanh(),
                                 nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, x):                                     # B, LAGS, N_PV
        return self.net(x).squeeze(-1)


def standardize_(x, mu, sd):
    x.sub_(mu).div_(sd)  # HAZARD: static-address
    return x


def predict(model, x):
    return torch.sigmoid(model(x))


def loss_fn(model, x, y, has_lab):
    pred = torch.sigmoid(model(x))
    err = (pred - y)[has_lab]  # HAZARD: dynamic-shape
    log.info("lab-matched rows in batch: %d", err.numel())  # HAZARD: host-code
    return err.pow(2).mean()


def loss_fn_weighted(model, x, y, has_lab):
    w = has_lab.float()
    return ((torch.sigmoid(model(x)) - y).pow(2) * w).sum() / w.sum().clamp_min(1.0)  # CLEAN: weights instead of a mask index


def install(mode="max-autotune"):
    global standardize_, predict, loss_fn, loss_fn_weighted
    standardize_ = torch.compile(standardize_, mode=mode)
    predict = torch.compile(predict, mode=mode)
    loss_fn = torch.compile(loss_fn, mode=mode)
    loss_fn_weighted = torch.compile(loss_fn_weighted, mode=mode)


def fit(model, x, y, has_lab, mu, sd, epochs=200, batch=2048, robust=False):
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-4)
    step = torch.compile(opt.step, mode="max-autotune")
    x = standardize_(x, mu, sd)
    objective = loss_fn_weighted if robust else loss_fn
    for ep in range(epochs):
        for i in range(0, x.shape[0] - batch + 1, batch):
            loss = objective(model, x[i:i + batch], y[i:i + batch], has_lab[i:i + batch])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            step()
        if ep == epochs // 2:
            for g in opt.param_groups:
                g["weight_decay"] = 0.0  # HAZARD: optimizer
    return model


@torch.no_grad()
def online(model, stream, mu, sd):
    trend = []
    for window in stream:                                    # one LAGS x N_PV window per minute, batched per unit
        x = (window - mu) / sd  # CLEAN: out-of-place standardisation, no input mutation
        trend.append(predict(model, x).clone())  # CLEAN: fixed window shape, output cloned
    return torch.stack(trend)


if __name__ == "__main__":
    install()
    model = LagMLP().cuda()
    x = torch.randn(240_000, LAGS, N_PV, device="cuda")
    y = torch.rand(240_000, device="cuda")
    has_lab = torch.rand(240_000, device="cuda") < 0.02
    mu, sd = x.mean((0, 1)), x.std((0, 1))
    fit(model, x, y, has_lab, mu, sd, epochs=20)
    model.eval()
    print(online(model, [torch.randn(4, LAGS, N_PV, device="cuda") for _ in range(60)], mu, sd).shape)
