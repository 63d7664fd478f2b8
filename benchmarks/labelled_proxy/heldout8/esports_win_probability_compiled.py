"""Live win-probability model for a MOBA esports broadcast overlay.

Per-minute match state (gold, XP, towers, dragons, kills per team) plus the
ten hero picks go through a causal transformer that outputs P(radiant wins)
at every minute.  Model, loss, normaliser and optimizer step are compiled.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

N_HEROES, N_STATE, MAX_MIN = 140, 18, 64


@dataclass
class TrainConfig:
    mode: str = "max-autotune"
    lr: float = 3e-4
    weight_decay: float = 0.05
    total_steps: int = 30_000
    decay_off_at: int = 20_000


class WinProbNet(nn.Module):
    def __init__(self, d=256):
        super().__init__()
        self.hero = nn.Embedding(N_HEROES, d)
        self.side = nn.Parameter(torch.randn(10, d) * 0.02)
        self.state = nn.Linear(N_STATE, d)
        self.tf = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 8, 4 * d, batch_first=True), 4)
        self.out = nn.Linear(d, 1)

    def forward(self, state, heroes):
        draft = (self.hero(heroes) + self.side).mean(1, keepdim=True)
        mask = nn.Transformer.generate_square_subsequent_mask(state.shape[1], device=state.device)
        return self.out(self.tf(self.state(state) + draft, mask=mask, is_causal=True)).squeeze(-1)


def standardize_(x, mu, sd):
    x.sub_(mu).div_(sd)  # HAZARD: static-address
    return x


def masked_bce(logits, won, mask):
    l = (F.binary_cross_entropy_with_logits(logits, won.unsqueeze(-1).expand_as(logits), reduction="none") * mask).sum()
    l = l / mask.sum()
    if torch.isnan(l):  # HAZARD: dynamic-control-flow
        l = torch.zeros_like(l)
    return l


def calibration_error(probs, won, bins=10):
    idx = (probs * bins).long().clamp(max=bins - 1)
    conf = torch.zeros(bins, device=probs.device).index_add_(0, idx, probs)
    acc = torch.zeros(bins, device=probs.device).index_add_(0, idx, won)
    cnt = torch.zeros(bins, device=probs.device).index_add_(0, idx, torch.ones_like(probs))
    return ((conf - acc).abs().sum() / cnt.sum()).item()  # HAZARD: host-sync


def _brier(probs, won):
    return ((probs - won) ** 2).mean().item()  # CLEAN: default torch.compile, no CUDA graphs


class Trainer:
    def __init__(self, model, cfg: TrainConfig, mu, sd):
        self.cfg, self.mu, self.sd = cfg, mu, sd
        self.model = torch.compile(model.cuda(), mode=cfg.mode)
        self.opt = torch.optim.AdamW(model.parameters(), lr=torch.tensor(cfg.lr, device="cuda"),
                                     weight_decay=cfg.weight_decay, capturable=True)
        self.step_fn = torch.compile(self.opt.step, mode=cfg.mode)
        self.norm = torch.compile(standardize_, mode=cfg.mode)
        self.loss = torch.compile(masked_bce, mode=cfg.mode)
        self.ece = torch.compile(calibration_error, mode=cfg.mode)
        self.brier = torch.compile(_brier)

    def step(self, i, state, heroes, won, mask):
        lr = self.cfg.lr * 0.5 * (1 + math.cos(math.pi * i / self.cfg.total_steps))
        for g in self.opt.param_groups:
            g["lr"].fill_(lr)  # CLEAN: tensor LR updated in place
            if i == self.cfg.decay_off_at:
                g["weight_decay"] = 0.0  # HAZARD: optimizer
        x = self.norm(state, self.mu, self.sd)
        loss = self.loss(self.model(x, heroes), won, mask)
        loss.backward()
        self.step_fn()
        self.opt.zero_grad(set_to_none=True)
        return loss.detach()

    @torch.no_grad()
    def validate(self, state, heroes, won, mask):
        probs = torch.sigmoid(self.model(self.norm(state, self.mu, self.sd), heroes))
        final = probs[torch.arange(probs.shape[0], device=probs.device), mask.sum(1).long() - 1].clone()
        return self.ece(final, won), self.brier(final, won)


if __name__ == "__main__":
    B, T = 128, MAX_MIN
    mu, sd = torch.zeros(N_STATE, device="cuda"), torch.ones(N_STATE, device="cuda")
    tr = Trainer(WinProbNet(), TrainConfig(), mu, sd)
    def batch():
        return (torch.randn(B, T, N_STATE, device="cuda"), torch.randint(0, N_HEROES, (B, 10), device="cuda"),
                torch.randint(0, 2, (B,), device="cuda").float(), torch.ones(B, T, device="cuda"))
    for i in range(30_000):
        tr.step(i, *batch())
    print(tr.validate(*batch()))
