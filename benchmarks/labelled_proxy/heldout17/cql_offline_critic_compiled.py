"""Conservative Q-learning (CQL) on a D4RL-style offline dataset.

The critic loss and both optimizer steps are compiled with CUDA graphs; the CQL weight is
tuned on the host with a Lagrangian rule on the measured conservative gap.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class CQLConfig:
    gamma: float = 0.99
    cql_alpha: float = 5.0
    target_gap: float = 10.0
    n_random: int = 10
    lr: float = 3e-4
    compile_mode: str = "reduce-overhead"


class QNet(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden=256):
        super().__init__()
        self.f = nn.Sequential(nn.Linear(obs_dim + act_dim, hidden), nn.ReLU(),
                               nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, obs, act):
        return self.f(torch.cat([obs, act], -1)).squeeze(-1)


class CQLCritic:
    def __init__(self, q, q_target, policy, cfg: CQLConfig):
        self.q, self.q_t, self.pi, self.cfg = q.cuda(), q_target.cuda(), policy.cuda(), cfg
        self.cql_alpha = cfg.cql_alpha
        self.last_gap = 0.0
        self.q_opt = torch.optim.Adam(self.q.parameters(), lr=cfg.lr)
        self.pi_opt = torch.optim.Adam(self.pi.parameters(), lr=torch.tensor(cfg.lr, device="cuda"), capturable=True)
        self.critic_loss = torch.compile(self._critic_loss, mode=cfg.compile_mode)
        self.q_step = torch.compile(self.q_opt.step, mode=cfg.compile_mode)
        self.pi_step = torch.compile(self.pi_opt.step, mode=cfg.compile_mode)

    def _critic_loss(self, obs, act, rew, next_obs, done):
        with torch.no_grad():
            target = rew + self.cfg.gamma * (1 - done) * self.q_t(next_obs, self.pi(next_obs))
        q_data = self.q(obs, act)
        if q_data.abs().max() > 1e4:  # HAZARD: dynamic-control-flow
            q_data = q_data.clamp(-1e4, 1e4)
        n = self.cfg.n_random
        rand_a = torch.rand(obs.shape[0], n, act.shape[-1], device=obs.device) * 2 - 1  # CLEAN: default CUDA generator
        q_rand = self.q(obs.unsqueeze(1).expand(-1, n, -1), rand_a)
        lse = torch.logsumexp(torch.cat([q_rand, q_data.unsqueeze(1)], 1), 1)
        gap = (lse - q_data).mean()
        self.last_gap = gap.item()  # HAZARD: host-sync
        alpha = self.cql_alpha  # HAZARD: python-scalar
        return F.mse_loss(q_data, target) + alpha * gap

    def train(self, loader, total_steps):
        history = []
        for step, (obs, act, rew, next_obs, done) in enumerate(loader):
            self.q_opt.zero_grad(set_to_none=True)
            loss = self.critic_loss(obs, act, rew, next_obs, done)
            history.append(loss.item())  # CLEAN: read before backward and before the next compiled call
            loss.backward()
            self.q_step()

            self.pi_opt.zero_grad(set_to_none=True)
            pi_loss = -self.q(obs, self.pi(obs)).mean()
            pi_loss.backward()
            self.pi_step()

            self.cql_alpha = max(0.0, self.cql_alpha + 1e-3 * (self.last_gap - self.cfg.target_gap))
            cos = 0.5 * (1 + math.cos(math.pi * step / total_steps))
            for group in self.q_opt.param_groups:
                group["lr"] = self.cfg.lr * cos  # HAZARD: optimizer
            self.pi_opt.param_groups[0]["lr"].fill_(self.cfg.lr * cos)  # CLEAN: tensor LR updated in place
            if step % 2 == 0:
                with torch.no_grad():
                    for p, pt in zip(self.q.parameters(), self.q_t.parameters()):
                        pt.lerp_(p, 0.005)
        return history
