"""Agency MBS cash-flow projection with a neural prepayment model.

Short-rate paths are simulated (Hull-White style), a prepayment network maps refi
incentive, loan age, burnout, seasonality and the rate level to annualised CPR,
and pool cash flows are projected path by path and discounted. The projection is
captured once and replayed for every pool in the book.
"""
import numpy as np
import torch
import torch.nn as nn

N_PATHS = 4096


class PrepayNet(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.f = nn.Sequential(nn.Linear(5, d), nn.Tanh(), nn.Linear(d, d), nn.Tanh(), nn.Linear(d, 1))

    def forward(self, x):
        return torch.sigmoid(self.f(x)).squeeze(-1) * 0.6  # CPR in [0, 0.6]


class PoolProjector:
    def __init__(self, net, horizon=360, device="cuda", seed=11):
        self.net = net.eval().to(device)
        self.device = device
        self.horizon = horizon
        self.mean_rev, self.vol = 0.03, 0.012
        self.path_gen = torch.Generator(device=device)
        self.path_gen.manual_seed(seed)
        self.shock_gen = torch.Generator(device=device)
        self.shock_gen.manual_seed(seed + 1)
        self.pool = torch.zeros(4, device=device)  # wac, balance, age, burnout
        self.r0 = torch.zeros((), device=device)
        self.graph = torch.cuda.CUDAGraph()
        self.static_out = None

    def set_horizon(self, months):
        self.horizon = months  # e.g. 120 for the 10y balloon desk

    def _project(self):
        wac, bal0, age0, burn0 = self.pool.unbind()
        r = self.r0.expand(N_PATHS).clone()
        bal = bal0.expand(N_PATHS).clone()
        disc = torch.ones(N_PATHS, device=self.device)
        pv = torch.zeros(N_PATHS, device=self.device)
        jump = np.random.normal(0.0, 0.002)  # HAZARD: host-code
        for t in range(self.horizon):  # HAZARD: python-scalar
            z = torch.randn(N_PATHS, device=self.device, generator=self.path_gen)  # CLEAN: generator registered with the graph before capture
            r = r + self.mean_rev * (0.035 - r) / 12 + self.vol * z / 12 ** 0.5
            if t % 12 == 0:
                r = r + jump + 0.001 * torch.randn(N_PATHS, device=self.device, generator=self.shock_gen)  # HAZARD: rng
            season = torch.full_like(r, (t % 12) / 12)
            x = torch.stack([wac - r, (age0 + t).expand(N_PATHS) / 360, burn0.expand(N_PATHS), season, r], -1)
            cpr = self.net(x)
            if (cpr > 0.5).any():  # HAZARD: dynamic-control-flow
                cpr = cpr.clamp(max=0.5)
            smm = 1 - (1 - cpr) ** (1 / 12)
            interest, prepaid = bal * wac / 12, bal * smm
            bal = bal - prepaid
            disc = disc / (1 + r / 12)
            pv = pv + disc * (interest + prepaid)
        return pv.mean(), pv.std()

    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                self._project()
        torch.cuda.current_stream().wait_stream(s)
        self.graph.register_generator_state(self.path_gen)
        with torch.cuda.graph(self.graph):
            self.static_out = self._project()

    def price_book(self, pools):
        results = []
        for wac, bal, age, burn, r0 in pools:
            self.pool.copy_(torch.tensor([wac, bal, age, burn]))  # CLEAN: host list copied into the static input before the replay
            self.r0.fill_(r0)  # CLEAN: in-place write of a static input
            self.graph.replay()
            results.append(self.static_out)  # HAZARD: static-address
        return results


if __name__ == "__main__":
    net = PrepayNet()
    net.load_state_dict(torch.load("prepay_net.pt"))
    proj = PoolProjector(net)
    proj.capture()
    proj.set_horizon(120)
    book = [(0.045, 1e6, 18, 0.2, 0.041), (0.062, 2.5e6, 40, 0.6, 0.041)]
    for (mean, std), pool in zip(proj.price_book(book), book):
        print(pool, mean.item(), std.item())
