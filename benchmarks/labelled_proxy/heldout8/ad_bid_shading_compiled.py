"""First-price auction bid shading for a DSP.

A win-rate model predicts a log-logistic win curve per bid request; the shader
picks the bid (a fraction of the private value) that maximises expected surplus.
"""
import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class ShadingConfig:
    n_feats: int = 96
    compile_mode: str = "reduce-overhead"
    lr: float = 3e-4
    warmup: int = 500
    total_steps: int = 20_000
    floor_cap: float = 40.0                 # CPM cap agreed with the exchanges
    fractions: list = field(default_factory=lambda: [0.3 + 0.02 * i for i in range(36)])


class WinCurve(nn.Module):
    def __init__(self, n_feats):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_feats, 256), nn.SiLU(), nn.Linear(256, 256), nn.SiLU())
        self.mu = nn.Linear(256, 1)
        self.log_s = nn.Linear(256, 1)

    def forward(self, x):
        h = self.body(x)
        return self.mu(h).squeeze(-1), self.log_s(h).squeeze(-1).clamp(-4, 3)


def win_prob(mu, log_s, bid):
    return torch.sigmoid((torch.log(bid) - mu) / torch.exp(log_s))


class BidShader:
    def __init__(self, cfg: ShadingConfig):
        self.cfg = cfg
        self.model = WinCurve(cfg.n_feats).cuda()
        self.fractions = torch.tensor(cfg.fractions, device="cuda")  # CLEAN: built once in __init__, outside any region
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr, weight_decay=1e-4)
        self.cmodel = torch.compile(self.model, mode=cfg.compile_mode)
        self.opt_step = torch.compile(self.opt.step, mode=cfg.compile_mode)
        self.shade = torch.compile(self._shade, mode=cfg.compile_mode)
        self.replay_auc = torch.compile(self._replay_auc)

    def _shade(self, feats, value):
        print("shading batch", feats.shape[0])  # HAZARD: host-code
        if (value <= 0).any():  # HAZARD: dynamic-control-flow
            value = value.clamp(min=0.01)
        mu, log_s = self.model(feats)
        grid = value.unsqueeze(-1) * self.fractions
        surplus = (value.unsqueeze(-1) - grid) * win_prob(mu.unsqueeze(-1), log_s.unsqueeze(-1), grid)
        bid = grid.gather(-1, surplus.argmax(-1, keepdim=True)).squeeze(-1)
        return torch.where(bid > self.cfg.floor_cap, self.cfg.floor_cap, bid)  # CLEAN: constant cap, branch-free

    def _replay_auc(self, feats, bids, won):
        p = win_prob(*self.model(feats), bids)
        return F.binary_cross_entropy(p.clamp(1e-6, 1 - 1e-6), won).item()  # CLEAN: default torch.compile, no CUDA graphs

    def lr_at(self, step):
        c = self.cfg
        if step < c.warmup:
            return c.lr * step / c.warmup
        t = (step - c.warmup) / (c.total_steps - c.warmup)
        return c.lr * 0.5 * (1 + math.cos(math.pi * t))

    def fit(self, loader):
        for step, (feats, bids, won) in enumerate(loader):
            for g in self.opt.param_groups:
                g["lr"] = self.lr_at(step)  # HAZARD: optimizer
            mu, log_s = self.cmodel(feats)
            loss = F.binary_cross_entropy(win_prob(mu, log_s, bids).clamp(1e-6, 1 - 1e-6), won)
            loss.backward()
            self.opt_step()
            self.opt.zero_grad(set_to_none=True)


def pad_to(x, n):
    return F.pad(x, (0, 0, 0, n - x.shape[0])) if x.dim() == 2 else F.pad(x, (0, n - x.shape[0]), value=1.0)


@torch.no_grad()
def serve(shader, request_stream):
    for feats, value in request_stream:
        yield shader.shade(feats, value).clone()  # HAZARD: dynamic-shape


@torch.no_grad()
def serve_padded(shader, request_stream, bucket=1024):
    for feats, value in request_stream:
        n = feats.shape[0]
        bids = shader.shade(pad_to(feats, bucket), pad_to(value, bucket))  # CLEAN: padded to one fixed bucket
        yield bids[:n].clone()


if __name__ == "__main__":
    cfg = ShadingConfig()
    sh = BidShader(cfg)
    train = [(torch.randn(4096, cfg.n_feats, device="cuda"), torch.rand(4096, device="cuda") * 10 + 0.1,
              torch.randint(0, 2, (4096,), device="cuda").float()) for _ in range(50)]
    sh.fit(train)
    reqs = [(torch.randn(n, cfg.n_feats, device="cuda"), torch.rand(n, device="cuda") * 20) for n in (311, 87, 940)]
    list(serve(sh, reqs))
    list(serve_padded(sh, reqs))
