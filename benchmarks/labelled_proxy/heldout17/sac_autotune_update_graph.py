"""SAC learner with automatic entropy tuning; the whole update is one replayed CUDA graph."""
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


def mlp(inp, out, hidden=256):
    return nn.Sequential(nn.Linear(inp, hidden), nn.ReLU(),
                         nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, out))


class TanhGaussianActor(nn.Module):
    def __init__(self, obs_dim, act_dim):
        super().__init__()
        self.net = mlp(obs_dim, 2 * act_dim)

    def forward(self, obs, eps):
        mu, log_std = self.net(obs).chunk(2, dim=-1)
        log_std = log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)
        pre = mu + log_std.exp() * eps
        act = torch.tanh(pre)
        logp = (-0.5 * eps.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        logp = logp - torch.log1p(-act.pow(2) + 1e-6).sum(-1)
        return act, logp


class SACLearner:
    def __init__(self, obs_dim, act_dim, batch=256, gamma=0.99, seed=0):
        dev = "cuda"
        self.actor = TanhGaussianActor(obs_dim, act_dim).to(dev)
        self.q1, self.q2 = mlp(obs_dim + act_dim, 1).to(dev), mlp(obs_dim + act_dim, 1).to(dev)
        self.q1_t, self.q2_t = copy.deepcopy(self.q1), copy.deepcopy(self.q2)
        self.log_alpha = torch.zeros((), device=dev, requires_grad=True)
        self.target_entropy = -float(act_dim)
        self.gamma, self.tau = gamma, 0.005
        critic_params = list(self.q1.parameters()) + list(self.q2.parameters())
        self.q_opt = torch.optim.Adam(critic_params, lr=3e-4, capturable=True)
        self.pi_opt = torch.optim.Adam(self.actor.parameters(), lr=3e-4, capturable=True)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=3e-4, capturable=True)
        self.act_gen = torch.Generator(device=dev).manual_seed(seed)
        self.smooth_gen = torch.Generator(device=dev).manual_seed(seed + 1)
        dims = {"obs": obs_dim, "act": act_dim, "next_obs": obs_dim}
        self.s = {k: torch.zeros(batch, dims[k], device=dev) if k in dims else torch.zeros(batch, device=dev)
                  for k in ("obs", "act", "rew", "next_obs", "done")}
        self.alpha_trace, self.graph = [], None

    def _update(self):
        b = self.s
        with torch.no_grad():
            eps2 = torch.randn(b["act"].shape, device="cuda", generator=self.smooth_gen)  # HAZARD: rng
            a2, logp2 = self.actor(b["next_obs"], eps2)
            sa2 = torch.cat([b["next_obs"], a2], -1)
            q_next = torch.min(self.q1_t(sa2), self.q2_t(sa2)).squeeze(-1)
            target = b["rew"] + self.gamma * (1.0 - b["done"]) * (q_next - self.log_alpha.exp() * logp2)
        sa = torch.cat([b["obs"], b["act"]], -1)
        q_loss = F.mse_loss(self.q1(sa).squeeze(-1), target) + F.mse_loss(self.q2(sa).squeeze(-1), target)
        self.q_opt.zero_grad(set_to_none=False)
        q_loss.backward()
        self.q_opt.step()  # CLEAN: capturable Adam, step count and lr kept on the device
        eps = torch.randn(b["act"].shape, device="cuda", generator=self.act_gen)  # CLEAN: generator registered with the graph
        a, logp = self.actor(b["obs"], eps)
        sa_pi = torch.cat([b["obs"], a], -1)
        q_pi = torch.min(self.q1(sa_pi), self.q2(sa_pi)).squeeze(-1)
        pi_loss = (self.log_alpha.exp().detach() * logp - q_pi).mean()
        self.pi_opt.zero_grad(set_to_none=False)
        pi_loss.backward()
        self.pi_opt.step()
        ent_target = self.target_entropy  # CLEAN: fixed by the action dimension, never changes
        alpha_loss = -(self.log_alpha * (logp.detach() + ent_target)).mean()
        self.alpha_opt.zero_grad(set_to_none=False)
        alpha_loss.backward()
        self.alpha_opt.step()
        self.alpha_trace.append(self.log_alpha.exp().item())  # HAZARD: host-sync

        tau = self.tau  # HAZARD: python-scalar
        with torch.no_grad():
            for net, tgt in ((self.q1, self.q1_t), (self.q2, self.q2_t)):
                for p, pt in zip(net.parameters(), tgt.parameters()):
                    pt.lerp_(p, tau)
        return q_loss.detach(), pi_loss.detach()

    def capture(self, warmup=3):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                self._update()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        self.graph.register_generator_state(self.act_gen)
        with torch.cuda.graph(self.graph):
            self.losses = self._update()

    def update(self, batch):  # batch sampled from the GPU replay buffer
        for k, v in batch.items():
            self.s[k].copy_(v, non_blocking=True)  # CLEAN: copy into the static minibatch
        self.graph.replay()

    def on_env_step(self, t, total):
        if t > total // 2:
            self.tau = 0.001
        frac = 1.0 - t / total
        for opt in (self.q_opt, self.pi_opt):
            for group in opt.param_groups:
                group["lr"] = 3e-4 * max(frac, 0.1)  # HAZARD: optimizer
