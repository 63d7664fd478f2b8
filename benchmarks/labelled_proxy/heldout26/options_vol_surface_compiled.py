"""Options market making: a neural implied-volatility surface refit on every quote burst.

An asyncio market-data client receives option quotes; every burst the surface network is
refitted for a few steps (warm start) and the quoter prices its two-sided markets off it.
The loss and the optimizer step are compiled with mode="max-autotune"; the risk desk can
change the refit learning rate and the smoothness penalty from the control panel.
"""
import asyncio

import torch
import torch.nn as nn

MAX_QUOTES = 512


class VolSurface(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 64), nn.Softplus(), nn.Linear(64, 64), nn.Softplus(),
                                 nn.Linear(64, 1), nn.Softplus())

    def forward(self, k, t):
        return self.net(torch.stack([k, t.sqrt()], -1)).squeeze(-1)


surface = VolSurface().cuda()
opt = torch.optim.Adam(surface.parameters(), lr=3e-3, weight_decay=1e-5)
STATS = {}


@torch.compile(mode="max-autotune")
def fit_loss(k, t, iv_mkt, weight):
    iv = surface(k, t)
    err = weight * (iv - iv_mkt) ** 2
    w_total = (iv ** 2 * t)
    calendar = w_total[1:] - w_total[:-1]
    if (calendar < -1e-4).any():  # HAZARD: dynamic-control-flow
        err = err + 10.0 * calendar.clamp_max(0).pow(2).mean()
    loss = err.mean()
    STATS["last_loss"] = loss.item()  # HAZARD: host-sync
    return loss


opt_step = torch.compile(opt.step, mode="max-autotune")


def refit(k, t, iv, w, steps=5):
    for _ in range(steps):
        opt.zero_grad(set_to_none=False)
        loss = fit_loss(k, t, iv, w)
        loss.backward()
        last = loss.detach().clone()  # CLEAN: cloned before the compiled optimizer step runs
        opt_step()
    return last


def pad_quotes(k, t, iv, w):
    n = k.shape[0]
    out = [torch.zeros(MAX_QUOTES, device="cuda") for _ in range(4)]
    for dst, src in zip(out, (k, t, iv, w)):
        dst[:n].copy_(src)
    out[1][n:] = 1.0
    return out


class Quoter:
    def __init__(self, edge_bps=4.0):
        self.edge_bps = edge_bps

    def on_burst(self, quotes):
        k = torch.tensor([q.log_moneyness for q in quotes], device="cuda")  # CLEAN: eager upload, outside the compiled loss
        t = torch.tensor([q.expiry_years for q in quotes], device="cuda")
        iv = torch.tensor([q.mid_iv for q in quotes], device="cuda")
        w = torch.tensor([q.vega for q in quotes], device="cuda")
        loss = refit(k, t, iv, w)  # HAZARD: dynamic-shape
        with torch.no_grad():
            fair = surface(k, t)  # CLEAN: eager module call, not the compiled function
        return loss, fair * (1 + self.edge_bps * 1e-4), fair * (1 - self.edge_bps * 1e-4)

    def on_burst_padded(self, quotes):
        cols = [[q.log_moneyness, q.expiry_years, q.mid_iv, q.vega] for q in quotes]
        k, t, iv, w = pad_quotes(*torch.tensor(cols, device="cuda").T)
        return refit(k, t, iv, w)


def on_control_panel(msg):
    for g in opt.param_groups:
        if "refit_lr" in msg:
            g["lr"] = float(msg["refit_lr"])  # HAZARD: optimizer
        if "smoothness" in msg:
            g["weight_decay"] = float(msg["smoothness"])  # HAZARD: optimizer


async def market_data(feed, quoter, panel):
    async for burst in feed:
        while not panel.empty():
            on_control_panel(panel.get_nowait())
        loss, bid, ask = quoter.on_burst(burst)
        print(f"refit loss {float(loss):.5f}")  # CLEAN: eager print of a cloned loss, outside the compiled code
        await asyncio.sleep(0)
