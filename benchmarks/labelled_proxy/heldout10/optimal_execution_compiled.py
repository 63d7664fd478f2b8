"""Deep optimal execution: learn a liquidation schedule under market impact.

A policy maps (time left, inventory left, last return, volatility) to the fraction
of the remaining inventory to sell in the next slice. Episodes are simulated on
GPU price paths; the objective is expected implementation shortfall plus
risk_aversion * variance (Almgren-Chriss). The episode loss and the optimizer
step are closures compiled with a module-level CG options dict.
"""
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn

CG = {"triton.cudagraphs": True}


@dataclass
class ExecConfig:
    steps: int = 20
    paths: int = 8192
    sigma: float = 0.02
    gamma_perm: float = 2.5e-7
    risk_aversion: float = 1e-6
    stress_prob: float = 0.1
    lr: float = 3e-4


class Policy(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.f = nn.Sequential(nn.Linear(4, d), nn.SiLU(), nn.Linear(d, d), nn.SiLU(), nn.Linear(d, 1))

    def forward(self, s):
        return torch.sigmoid(self.f(s))


def build(policy, cfg, device="cuda"):
    eta = torch.tensor(2.5e-6, device=device)  # temporary impact, re-estimated daily
    opt = torch.optim.Adam(policy.parameters(), lr=cfg.lr)

    @torch.compile(options=CG)
    def shortfall(x0, s0):
        x, s = x0.clone(), s0.clone()
        cost, ret = torch.zeros_like(x0), torch.zeros_like(x0)
        vol = cfg.sigma * (3.0 if np.random.rand() < cfg.stress_prob else 1.0)  # HAZARD: host-code
        for t in range(cfg.steps):
            state = torch.stack([torch.full_like(x, 1 - t / cfg.steps), x / x0, ret, torch.full_like(x, vol)], -1)
            v = policy(state).squeeze(-1) * x
            s_next = s * (1 + vol * torch.randn_like(s)) - cfg.gamma_perm * v  # CLEAN: default-generator randn inside the compiled graph
            cost = cost + v * (s - s_next) + eta * v * v  # CLEAN: eta is a device tensor, refreshed in place
            ret, s, x = s_next / s - 1, s_next, x - v
        if x.abs().max() > 1e-3:  # HAZARD: dynamic-control-flow
            cost = cost + 1e-2 * x.abs() * s
        lam = cfg.risk_aversion  # HAZARD: python-scalar
        return cost.mean() + lam * cost.var()

    step = torch.compile(opt.step, options=CG)
    return shortfall, step, opt, eta


def re_estimate_eta(fills):
    slippage = np.array([f["slippage"] for f in fills])
    size = np.array([f["size"] for f in fills])
    return float((slippage * size).sum() / (size * size).sum())


def train(fill_log, iters=5000, device="cuda"):
    cfg = ExecConfig()
    policy = Policy().to(device)
    shortfall, step, opt, eta = build(policy, cfg, device)
    x0 = torch.full((cfg.paths,), 1e6, device=device)
    s0 = torch.full((cfg.paths,), 50.0, device=device)
    hist = []
    for it in range(iters):
        loss = shortfall(x0, s0)
        hist.append(loss.detach().clone())  # CLEAN: loss cloned before backward and the compiled step
        opt.zero_grad(set_to_none=False)
        loss.backward()
        step()
        if it % 1000 == 999:
            cfg.risk_aversion *= 2.0  # curriculum: become more risk-averse
            for group in opt.param_groups:
                group["lr"] *= 0.5  # HAZARD: optimizer
        if it % 500 == 0:
            eta.fill_(re_estimate_eta(fill_log.today()))
    return policy, torch.stack(hist).cpu()


if __name__ == "__main__":
    from fills import FillLog

    train(FillLog("/data/fills"))
