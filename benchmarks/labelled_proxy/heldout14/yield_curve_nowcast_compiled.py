"""Intraday yield-curve nowcast for a treasury desk: network -> Nelson-Siegel-Svensson factors.

The loss, and the optimizer steps of the body and of the factor heads, are compiled with
options={"triton.cudagraphs": True}.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("nss")
CG = {"triton.cudagraphs": True}
TENORS = torch.tensor([0.25, 0.5, 1, 2, 3, 5, 7, 10, 20, 30], dtype=torch.float32)


def nss(beta, lam, tau):
    t = tau[None]
    x1, x2 = t / lam[:, :1], t / lam[:, 1:]
    f1 = (1 - torch.exp(-x1)) / x1
    f2 = f1 - torch.exp(-x1)
    f3 = (1 - torch.exp(-x2)) / x2 - torch.exp(-x2)
    return beta[:, :1] + beta[:, 1:2] * f1 + beta[:, 2:3] * f2 + beta[:, 3:4] * f3


class FactorNet(nn.Module):
    def __init__(self, n_feat=24):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_feat, 128), nn.SiLU(), nn.Linear(128, 128), nn.SiLU())
        self.beta = nn.Linear(128, 4)
        self.lam = nn.Linear(128, 2)

    def forward(self, feats):
        h = self.body(feats)
        return self.beta(h), F.softplus(self.lam(h)) + 0.05


class NowcastTrainer:
    def __init__(self, model, device="cuda"):
        self.model = model.to(device)
        self.tau = TENORS.to(device)
        heads = list(model.beta.parameters()) + list(model.lam.parameters())
        self.opt = torch.optim.AdamW(model.body.parameters(), lr=1e-3, weight_decay=1e-2)
        self.opt_heads = torch.optim.Adam(heads, lr=torch.tensor(3e-4, device=device), capturable=True)
        self.sched = torch.optim.lr_scheduler.StepLR(self.opt, step_size=5, gamma=0.5)
        self.loss_step = torch.compile(self._loss, options=CG)
        self.step_body = torch.compile(self.opt.step, options=CG)
        self.step_heads = torch.compile(self.opt_heads.step, options=CG)

    def _loss(self, feats, yields, mask):
        beta, lam = self.model(feats)
        if (lam[:, 0] > lam[:, 1]).any():  # HAZARD: dynamic-control-flow
            lam = lam.sort(-1).values       # keep the two hump positions ordered
        err = (nss(beta, lam, self.tau) - yields).pow(2) * mask  # CLEAN: missing tenors masked by multiplication, shape stays fixed
        log.debug("curve fit rmse %s", err.mean().sqrt())  # HAZARD: host-code
        return err.sum() / mask.sum().clamp_min(1.0)

    def fit(self, loader, epochs=20):
        for epoch in range(epochs):
            for feats, yields, mask in loader:
                loss = self.loss_step(feats, yields, mask)
                last = loss.detach().clone()  # CLEAN: cloned before backward and the compiled steps
                loss.backward()
                self.step_body()
                self.step_heads()
                self.opt.zero_grad(set_to_none=True)
                self.opt_heads.zero_grad(set_to_none=True)
            self.sched.step()  # HAZARD: optimizer
            if epoch == 10:
                self.opt.param_groups[0]["weight_decay"] = 0.0  # HAZARD: optimizer
                self.opt_heads.param_groups[0]["lr"].fill_(1e-4)  # CLEAN: tensor LR updated in place
            log.info("epoch %d last loss %.6f", epoch, last.item())
