"""Daily Heston calibration with a neural pricer (deep-calibration, Horvath et al.).

Quant research code: the pricer MLP maps (params, strike, maturity) to implied vol;
the calibration objective is compiled with reduce-overhead and stored on the
Calibrator.  Strikes/maturities come from the day's option chain (pandas).
"""
import numpy as np
import pandas as pd
import torch
import torch.nn as nn

dev = "cuda"


class PricerMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(7, 128), nn.ELU(), nn.Linear(128, 128), nn.ELU(), nn.Linear(128, 1))

    def forward(self, theta, km):
        th = theta.expand(km.shape[0], -1)
        return nn.functional.softplus(self.net(torch.cat([th, km], 1))).squeeze(-1)


class Calibrator:
    def __init__(self, pricer):
        self.pricer = pricer.eval().requires_grad_(False)
        self.mean_reversion = 1.5                           # fixed kappa, set per regime
        self.objective = torch.compile(self._objective, mode="reduce-overhead")
        self.report = torch.compile(self._report)            # default inductor, no cudagraphs

    def _objective(self, raw, km, iv_mkt, w):
        kappa = self.mean_reversion  # HAZARD: python-scalar
        v0, theta_lr, sigma = raw[0].exp(), raw[1].exp(), raw[2].exp()
        rho = torch.tanh(raw[3])
        feller = torch.relu(sigma ** 2 - 2 * kappa * theta_lr)
        theta = torch.stack([v0, theta_lr, sigma, rho, torch.full_like(v0, kappa)])[None, :]
        iv = self.pricer(theta, km)
        rmse = torch.sqrt((w * (iv - iv_mkt) ** 2).sum() / w.sum())
        loss = rmse + 10.0 * feller
        if torch.isnan(loss):  # HAZARD: dynamic-control-flow
            loss = torch.zeros_like(loss)
        print("iv rmse", rmse)  # HAZARD: host-code
        return torch.nan_to_num(loss, nan=1e3)  # CLEAN: no host branch

    def _report(self, raw, km, iv_mkt):
        theta = torch.cat([raw[:3].exp(), torch.tanh(raw[3:4]), raw.new_tensor([self.mean_reversion])])[None]
        err = self.pricer(theta, km) - iv_mkt
        print("max abs iv error", err.abs().max())  # CLEAN: default torch.compile, no CUDA graphs
        return err

    def calibrate(self, chain, n_iter=300):
        km = torch.tensor(np.stack([np.log(chain.strike / chain.spot), chain.T], 1), dtype=torch.float32, device=dev)
        iv_mkt = torch.tensor(chain.iv.to_numpy(), dtype=torch.float32, device=dev)  # CLEAN: built eagerly, before the compiled objective
        w = torch.tensor(chain.vega.to_numpy(), dtype=torch.float32, device=dev)
        raw = torch.tensor([np.log(0.04), np.log(0.04), np.log(0.5), -0.7], device=dev, requires_grad=True)
        opt = torch.optim.LBFGS([raw], lr=0.5, max_iter=20)

        def closure():
            opt.zero_grad()
            loss = self.objective(raw, km, iv_mkt, w)  # HAZARD: dynamic-shape
            loss.backward()
            return loss
        for _ in range(n_iter // 20):
            opt.step(closure)
        self.report(raw.detach(), km, iv_mkt)
        return raw.detach().cpu().numpy()


if __name__ == "__main__":
    pricer = PricerMLP().to(dev)
    pricer.load_state_dict(torch.load("heston_pricer.pt"))
    cal = Calibrator(pricer)
    chains = pd.read_parquet("spx_chains_2023.parquet")
    params = {}
    for day, chain in chains.groupby("date"):
        cal.mean_reversion = 2.5 if chain.vix.iloc[0] > 25 else 1.5
        params[day] = cal.calibrate(chain)
    pd.DataFrame(params, index=["lnv0", "lntheta", "lnsigma", "rho_raw"]).T.to_csv("heston_params.csv")
