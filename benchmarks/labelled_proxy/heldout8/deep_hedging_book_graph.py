"""Deep hedging of a short call book under proportional transaction costs.

A recurrent policy chooses the delta at every rebalancing date of simulated
jump-diffusion paths; the loss is the entropic risk of the terminal P&L.  The
full step (simulation, rollout, loss, backward, AdamW) is one CUDA graph.
"""
import numpy as np
import torch
import torch.nn as nn


class HedgePolicy(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.cell = nn.GRUCell(3, hidden)
        self.out = nn.Linear(hidden, 1)

    def forward(self, feats, h):
        h = self.cell(feats, h)
        return torch.tanh(self.out(h)).squeeze(-1) * 1.5, h


class DeepHedger:
    def __init__(self, n_paths=8192, n_steps=30, strike=100.0, seed=17):
        self.policy = HedgePolicy().cuda()
        self.opt = torch.optim.AdamW(self.policy.parameters(), lr=5e-4, capturable=True)
        self.n_paths, self.n_steps, self.strike, self.seed = n_paths, n_steps, strike, seed
        self.path_gen = torch.Generator(device="cuda")
        self.path_gen.manual_seed(seed)
        self.jump_gen = torch.Generator(device="cuda")
        self.jump_gen.manual_seed(seed + 1)
        self.spot_np = np.array([100.0], dtype=np.float32)   # refreshed from the market-data feed
        self.vol = torch.tensor(0.2, device="cuda")
        self.cost_bps = 2.0
        self.risk_aversion = 1.0
        self.steps_done = 0

    def set_regime(self, stressed: bool):
        self.vol.fill_(0.45 if stressed else 0.2)  # CLEAN: device scalar changed in place
        self.cost_bps = 8.0 if stressed else 2.0

    def _simulate(self):
        dt = 1.0 / 252
        s0 = torch.as_tensor(self.spot_np).to("cuda")  # HAZARD: pinned-memory
        dz = torch.randn(self.n_paths, self.n_steps, device="cuda", generator=self.path_gen)  # CLEAN: generator registered with the graph
        jumps = torch.rand(self.n_paths, self.n_steps, device="cuda", generator=self.jump_gen) < 0.01  # HAZARD: rng
        log_ret = -0.5 * self.vol ** 2 * dt + self.vol * dt ** 0.5 * dz - 0.08 * jumps
        return s0 * torch.exp(torch.cumsum(log_ret, dim=1))

    def _step(self):
        torch.cuda.manual_seed(self.seed + self.steps_done)  # HAZARD: rng
        self.steps_done += 1  # HAZARD: host-code
        S = self._simulate()
        h = torch.zeros(self.n_paths, 64, device="cuda")
        delta_prev = torch.zeros(self.n_paths, device="cuda")
        pnl = torch.zeros(self.n_paths, device="cuda")
        trade_cost = torch.zeros(self.n_paths, device="cuda")
        for t in range(self.n_steps - 1):
            tau = torch.full_like(delta_prev, (self.n_steps - t) / 252)
            feats = torch.stack([torch.log(S[:, t] / self.strike), tau, delta_prev], -1)
            delta, h = self.policy(feats, h)
            delta = delta + 0.01 * torch.randn_like(delta)  # CLEAN: default CUDA generator is graph-safe
            trade_cost = trade_cost + (delta - delta_prev).abs() * S[:, t]
            pnl = pnl + delta * (S[:, t + 1] - S[:, t])
            delta_prev = delta
        cost = self.cost_bps * 1e-4 * trade_cost  # HAZARD: python-scalar
        pnl = pnl - cost - torch.relu(S[:, -1] - self.strike)
        loss = torch.logsumexp(-self.risk_aversion * pnl, 0) / self.risk_aversion
        loss.backward()
        self.opt.step()  # CLEAN: capturable AdamW inside the graph
        return loss.detach()

    def build(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self.opt.zero_grad(set_to_none=True)
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        self.opt.zero_grad(set_to_none=True)
        self.graph = torch.cuda.CUDAGraph()
        self.graph.register_generator_state(self.path_gen)
        with torch.cuda.graph(self.graph):
            self.static_loss = self._step()

    def train(self, n_iters, feed):
        self.build()
        history = []
        for i in range(n_iters):
            self.spot_np[0] = feed.last_price()
            self.set_regime(feed.vix() > 30)
            self.graph.replay()
            history.append(self.static_loss.clone())  # CLEAN: cloned before the next replay
        return torch.stack(history).cpu()


class FakeFeed:
    def last_price(self):
        return 100.0 + np.random.randn()

    def vix(self):
        return 18.0 + 20.0 * np.random.rand()


if __name__ == "__main__":
    DeepHedger().train(500, FakeFeed())
