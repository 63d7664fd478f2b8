"""DrQ-v2 pixel-based continuous control (DMC walker_walk): critic update captured in a CUDA graph.

Agent code follows the reference implementation; `GraphedCriticUpdate` is the assistant's
addition ("the critic update runs every env step, graph it").
"""
import re

import torch
import torch.nn as nn
import torch.nn.functional as F


def schedule(spec, step):
    m = re.match(r"linear\((.+),(.+),(.+)\)", spec)
    init, final, duration = [float(g) for g in m.groups()]
    return init + min(step / duration, 1.0) * (final - init)


class RandomShiftsAug(nn.Module):
    def __init__(self, pad, generator=None):
        super().__init__()
        self.pad, self.gen = pad, generator

    def forward(self, x):
        n, _, h, _ = x.shape
        x = F.pad(x, (self.pad,) * 4, mode="replicate")
        eps = 1.0 / (h + 2 * self.pad)
        ar = torch.linspace(-1.0 + eps, 1.0 - eps, h + 2 * self.pad, device=x.device)[:h]
        base = torch.stack(torch.meshgrid(ar, ar, indexing="xy"), -1).unsqueeze(0).expand(n, h, h, 2)
        shift = torch.randint(0, 2 * self.pad + 1, (n, 1, 1, 2), device=x.device, generator=self.gen)  # HAZARD: rng
        return F.grid_sample(x, base + shift * 2.0 / (h + 2 * self.pad), padding_mode="zeros", align_corners=False)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(9, 32, 3, 2), nn.ReLU(), *[m for _ in range(3) for m in (nn.Conv2d(32, 32, 3, 1), nn.ReLU())])

    def forward(self, obs):
        return self.net(obs / 255.0 - 0.5).flatten(1)


class Critic(nn.Module):
    def __init__(self, repr_dim, act_dim, hidden=1024):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(repr_dim, 50), nn.LayerNorm(50), nn.Tanh())
        self.q1 = nn.Sequential(nn.Linear(50 + act_dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.q2 = nn.Sequential(nn.Linear(50 + act_dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, h, a):
        z = torch.cat([self.trunk(h), a], -1)
        return self.q1(z), self.q2(z)


class GraphedCriticUpdate:
    def __init__(self, encoder, critic, critic_target, actor, batch, obs_shape, act_dim, cfg):
        self.enc, self.critic, self.critic_t, self.actor = encoder, critic, critic_target, actor
        self.cfg = cfg
        self.aug = RandomShiftsAug(4, generator=torch.Generator(device="cuda").manual_seed(cfg["seed"]))
        params = list(encoder.parameters()) + list(critic.parameters())
        self.opt = torch.optim.Adam(params, lr=cfg["lr"])
        self.step = 0
        self.metrics = {}
        self.target_stream = torch.cuda.Stream()  # overlap the target Q with the online forward
        self.s_obs = torch.zeros(batch, *obs_shape, device="cuda")
        self.s_next = torch.zeros_like(self.s_obs)
        self.s_act = torch.zeros(batch, act_dim, device="cuda")
        self.s_rew = torch.zeros(batch, 1, device="cuda")
        self.s_disc = torch.zeros(batch, 1, device="cuda")
        self.graph = None

    def _update(self):
        obs, next_obs = self.enc(self.aug(self.s_obs)), self.enc(self.aug(self.s_next)).detach()
        stddev = schedule(self.cfg["stddev_schedule"], self.step)  # HAZARD: python-scalar
        with torch.no_grad(), torch.cuda.stream(self.target_stream):  # HAZARD: stream
            mu = self.actor(next_obs)
            noise = (torch.randn_like(mu) * stddev).clamp(-0.3, 0.3)  # CLEAN: default CUDA generator
            tq1, tq2 = self.critic_t(next_obs, (mu + noise).clamp(-1, 1))
            target_q = self.s_rew + self.s_disc * torch.min(tq1, tq2)
        q1, q2 = self.critic(obs, self.s_act)
        loss = F.mse_loss(q1, target_q) + F.mse_loss(q2, target_q)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()  # HAZARD: optimizer
        self.metrics["critic_loss"] = loss.item()  # HAZARD: host-sync
        with torch.no_grad():
            for p, tp in zip(self.critic.parameters(), self.critic_t.parameters()):
                tp.lerp_(p, self.cfg["tau"])  # CLEAN: in-place Polyak update of captured tensors, fixed tau
        return loss

    def __call__(self, obs, act, rew, disc, next_obs, step):
        for dst, src in ((self.s_obs, obs), (self.s_act, act), (self.s_rew, rew), (self.s_disc, disc), (self.s_next, next_obs)):
            dst.copy_(src)  # CLEAN: copy_ into static inputs
        self.step = step
        if self.graph is None:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    self._update()
            torch.cuda.current_stream().wait_stream(s)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.s_loss = self._update()
        self.graph.replay()
        return self.s_loss
