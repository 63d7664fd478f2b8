"""Online training of a quote-skew policy for a crypto market maker.

Every 250 ms the desk's order-book simulator emits a batch of book states; the
policy outputs bid/ask half-spreads and is trained through a differentiable
fill model (expected spread PnL minus an inventory penalty). The whole training
step is captured once and replayed for the rest of the session.
"""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class RiskConfig:
    inventory_penalty: float = 0.02
    lr: float = 3e-4
    weight_decay: float = 1e-4
    seed: int = 7


class QuotePolicy(nn.Module):
    def __init__(self, n_feat=40, hidden=128):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_feat, hidden), nn.SiLU(),
                                 nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 2))

    def forward(self, x):
        return F.softplus(self.net(x))          # half-spreads in ticks


def fill_prob(offset, vol):
    return torch.exp(-offset / vol.clamp_min(1e-3))


class OnlineTrainer:
    def __init__(self, cfg: RiskConfig, batch=2048, n_feat=40):
        self.cfg = cfg
        self.policy = QuotePolicy(n_feat).cuda()
        self.opt = torch.optim.AdamW(self.policy.parameters(), lr=cfg.lr,
                                     weight_decay=cfg.weight_decay, capturable=True)
        self.static_x = torch.zeros(batch, n_feat, device="cuda")
        self.static_mid_move = torch.zeros(batch, device="cuda")
        self.static_inv = torch.zeros(batch, device="cuda")
        self.session = 0
        self.pnl_log = []
        self.graph = None
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):            # eager warm-up in session 0
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(side)

    def _step(self):
        torch.cuda.manual_seed(self.cfg.seed + self.session)  # HAZARD: rng
        vol = self.static_x[:, 0].abs() + 0.5
        bid, ask = self.policy(self.static_x).unbind(-1)
        shock = torch.randn_like(vol) * 0.1  # CLEAN: default CUDA generator is captured
        p_bid, p_ask = fill_prob(bid, vol + shock), fill_prob(ask, vol + shock)
        pnl = p_bid * (bid + self.static_mid_move) + p_ask * (ask - self.static_mid_move)
        inv = self.static_inv + p_bid - p_ask
        lam = self.cfg.inventory_penalty  # HAZARD: python-scalar
        loss = -(pnl - lam * inv.pow(2)).mean()
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.policy.parameters(), 1.0)  # CLEAN: clip_grad_norm_ is capturable
        self.opt.step()  # CLEAN: AdamW built with capturable=True
        self.pnl_log.append(loss.item())  # HAZARD: host-sync
        return loss.detach()

    def start_session(self, k: int):
        self.session = k
        if self.graph is None:
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.static_loss = self._step()

    def set_risk_limits(self, penalty: float):
        self.cfg.inventory_penalty = penalty        # risk desk tightens this intraday

    def end_of_hour(self, hour: int):
        for g in self.opt.param_groups:
            g["lr"] = self.cfg.lr * 0.5 ** (hour // 6)  # HAZARD: optimizer
            g["weight_decay"] = 0.0 if hour >= 20 else self.cfg.weight_decay  # HAZARD: optimizer

    def train_on(self, x, mid_move, inv):
        self.static_x.copy_(x)  # CLEAN: copy_ into the static input
        self.static_mid_move.copy_(mid_move)
        self.static_inv.copy_(inv)
        self.graph.replay()
        return float(self.static_loss)  # CLEAN: read after replay, outside the capture


def run_day(feed, cfg=RiskConfig()):
    trainer = OnlineTrainer(cfg)
    trainer.start_session(1)
    for hour in range(24):
        for x, mid_move, inv in feed(hour):
            trainer.train_on(x, mid_move, inv)
        if hour == 14:
            trainer.set_risk_limits(0.05)
        trainer.end_of_hour(hour)
    return trainer
