"""Contrastive RL (goal-conditioned): InfoNCE critic over (s, a) and future-state goals.

Goal relabelling, critic loss, actor loss and the critic optimizer step are all
compiled with the dynamo "cudagraphs" backend.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

GOAL_DIM = 3


def mlp(i, o, h=256):
    return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, o))


class ContrastiveCritic(nn.Module):
    def __init__(self, obs_dim, act_dim, repr_dim=64):
        super().__init__()
        self.sa = mlp(obs_dim + act_dim, repr_dim)
        self.g = mlp(GOAL_DIM, repr_dim)

    def forward(self, obs, act, goal):
        return self.sa(torch.cat([obs, act], -1)) @ self.g(goal).T


class GoalActor(nn.Module):
    def __init__(self, obs_dim, act_dim):
        super().__init__()
        self.net = mlp(obs_dim + GOAL_DIM, 2 * act_dim)

    def forward(self, obs, goal):
        mu, log_std = self.net(torch.cat([obs, goal], -1)).chunk(2, -1)
        std = log_std.clamp(-5, 2).exp()
        pre = mu + std * torch.randn_like(mu)
        a = torch.tanh(pre)
        logp = (-0.5 * ((pre - mu) / std) ** 2 - std.log()).sum(-1) - torch.log1p(-a.pow(2) + 1e-6).sum(-1)
        return a, logp


def relabel_goals(traj_obs, t, gamma):
    offs = torch.from_numpy(np.random.geometric(1.0 - gamma, size=t.shape[0])).to(t.device)  # HAZARD: host-code
    ft = torch.minimum(t + offs, torch.full_like(t, traj_obs.shape[1] - 1))
    return traj_obs[torch.arange(t.shape[0], device=t.device), ft, :GOAL_DIM]


def critic_loss(critic, obs, act, goal, obs_mean, obs_std):
    obs_n = (obs - obs_mean) / obs_std  # CLEAN: normalized out of place, the input is not mutated
    logits = critic(obs_n, act, goal)
    labels = torch.arange(logits.shape[0], device=logits.device)
    acc = (logits.argmax(1) == labels).float().mean().item()  # HAZARD: host-sync
    return F.cross_entropy(logits, labels) + 0.01 * logits.logsumexp(1).pow(2).mean(), logits, acc


def actor_loss(actor, critic, obs, goal, alpha):
    a, logp = actor(obs, goal)
    q = torch.diagonal(critic(obs, a, goal))
    return (alpha * logp - q).mean()  # HAZARD: python-scalar


class CRLAgent:
    def __init__(self, obs_dim, act_dim, lr=3e-4, gamma=0.99, target_entropy=None):
        self.critic, self.actor = ContrastiveCritic(obs_dim, act_dim).cuda(), GoalActor(obs_dim, act_dim).cuda()
        self.c_opt = torch.optim.Adam(self.critic.parameters(), lr=lr)
        self.a_opt = torch.optim.Adam(self.actor.parameters(), lr=lr)
        self.log_alpha = torch.zeros((), device="cuda", requires_grad=True)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=lr)
        self.alpha, self.gamma = 1.0, gamma
        self.target_entropy = -act_dim if target_entropy is None else target_entropy
        self.relabel = torch.compile(relabel_goals, backend="cudagraphs")
        self.critic_step = torch.compile(critic_loss, backend="cudagraphs")
        self.actor_step = torch.compile(actor_loss, backend="cudagraphs")
        self.c_opt_step = torch.compile(self.c_opt.step, backend="cudagraphs")

    def update(self, traj_obs, t, obs, act, obs_mean, obs_std, it, total_iters):
        goal = self.relabel(traj_obs, t, self.gamma)
        c_loss, logits, acc = self.critic_step(self.critic, obs, act, goal, obs_mean, obs_std)
        a_loss = self.actor_step(self.actor, self.critic, obs, goal, self.alpha)
        gap = (torch.diagonal(logits).mean() - logits.mean()).detach()  # CLEAN: training step, the backward is still pending so the output stays live
        self.c_opt.zero_grad(set_to_none=True)
        self.a_opt.zero_grad(set_to_none=True)
        (c_loss + a_loss).backward()
        self.c_opt_step()
        self.a_opt.step()
        for group in self.c_opt.param_groups:
            group["lr"] = 3e-4 * (1.0 - it / total_iters)  # HAZARD: optimizer
        with torch.no_grad():
            _, logp = self.actor(obs, goal)
        alpha_loss = -(self.log_alpha * (logp + self.target_entropy)).mean()
        self.alpha_opt.zero_grad()
        alpha_loss.backward()
        self.alpha_opt.step()
        self.alpha = self.log_alpha.exp().item()  # CLEAN: host read in eager code, between compiled calls
        return acc, gap
