"""Arbitrage-aware neural implied-volatility surface for an equity-index desk.

The net maps (log-moneyness, maturity) to total implied variance.  The loss
is a vega-weighted quote fit plus calendar and butterfly penalties computed
with autograd.  The whole training step is captured once and replayed for
every snapshot of the option chain.
"""
import numpy as np
import torch
import torch.nn as nn


class VarianceNet(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.f = nn.Sequential(nn.Linear(2, width), nn.Softplus(), nn.Linear(width, width), nn.Softplus(),
                               nn.Linear(width, 1), nn.Softplus())

    def forward(self, k, t):
        return self.f(torch.stack([k, t], -1)).squeeze(-1) * t


class SurfaceFitter:
    def __init__(self, n_quotes=2048, n_colloc=4096, rate_curve=None):
        self.net = VarianceNet().cuda()
        self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-3, capturable=True)
        self.sched = torch.optim.lr_scheduler.StepLR(self.opt, step_size=200, gamma=0.5)
        self.rate_curve = rate_curve if rate_curve is not None else np.full(16, 0.04, dtype=np.float32)
        self.lam_cal = 1.0                                    # ramped up during the fit
        self.lam_fly = torch.ones((), device="cuda")          # device weight, ramped with fill_
        self.k = torch.zeros(n_quotes, device="cuda")
        self.t = torch.zeros(n_quotes, device="cuda")
        self.w_mkt = torch.zeros(n_quotes, device="cuda")
        self.vega = torch.ones(n_quotes, device="cuda")
        self.ck = torch.linspace(-1.5, 1.0, n_colloc, device="cuda")
        self.ct = torch.rand(n_colloc, device="cuda") * 2 + 0.02
        self.graph = None

    def _step(self):
        rates = torch.from_numpy(self.rate_curve).cuda()  # HAZARD: pinned-memory
        fwd_adj = rates.mean() * self.t
        w = self.net(self.k - fwd_adj, self.t)
        fit = (self.vega * (w - self.w_mkt) ** 2).mean()
        ck = self.ck.detach().requires_grad_(True)
        ct = self.ct.detach().requires_grad_(True)
        wc = self.net(ck, ct)
        dw_dk, dw_dt = torch.autograd.grad(wc.sum(), (ck, ct), create_graph=True)
        d2w_dk2 = torch.autograd.grad(dw_dk.sum(), ck, create_graph=True)[0]
        g = (1 - ck * dw_dk / (2 * wc)) ** 2 - dw_dk ** 2 / 4 * (1 / wc + 0.25) + d2w_dk2 / 2
        cal = torch.relu(-dw_dt).mean()
        fly = torch.relu(-g).mean()
        loss = fit + self.lam_cal * cal + self.lam_fly * fly  # HAZARD: python-scalar
        loss.backward()
        self.opt.step()  # CLEAN: Adam built with capturable=True
        self.last_loss = float(loss)  # HAZARD: host-sync
        return loss.detach()

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.opt.zero_grad(set_to_none=True)
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        self.opt.zero_grad(set_to_none=True)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_loss = self._step()

    def load_chain(self, chain):
        self.k.copy_(chain["log_moneyness"], non_blocking=True)  # CLEAN: copy_ into the captured inputs
        self.t.copy_(chain["maturity"], non_blocking=True)
        self.w_mkt.copy_(chain["iv"] ** 2 * chain["maturity"], non_blocking=True)
        self.vega.copy_(chain["vega"] / chain["vega"].mean(), non_blocking=True)

    def fit(self, chains, iters_per_chain=50):
        self.capture()
        it = 0
        for chain in chains:
            self.load_chain(chain)
            for _ in range(iters_per_chain):
                self.lam_cal = min(10.0, 1.0 + it / 100)
                self.lam_fly.fill_(min(10.0, 1.0 + it / 100))  # CLEAN: device tensor updated in place
                self.graph.replay()
                self.sched.step()  # HAZARD: optimizer
                it += 1
        return self.static_loss.item()  # CLEAN: read after replay, outside the graph


if __name__ == "__main__":
    n = 2048
    chains = [{"log_moneyness": torch.randn(n, device="cuda") * 0.3, "maturity": torch.rand(n, device="cuda") + 0.05,
               "iv": torch.rand(n, device="cuda") * 0.3 + 0.1, "vega": torch.rand(n, device="cuda") + 0.1}
              for _ in range(8)]
    print(SurfaceFitter(n_quotes=n).fit(chains))
