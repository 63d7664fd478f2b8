"""Dreamer-style world model (RSSM) with actor-critic learning in imagination.

The whole update (world-model loss, imagination rollout, both optimizer steps) is one CUDA graph.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

DETER, STOCH = 200, 30


def mlp(i, o, h=200):
    return nn.Sequential(nn.Linear(i, h), nn.ELU(), nn.Linear(h, o))


class RSSM(nn.Module):
    def __init__(self, obs_dim=64, act_dim=6):
        super().__init__()
        self.cell = nn.GRUCell(STOCH + act_dim, DETER)
        self.prior, self.post = mlp(DETER, 2 * STOCH), mlp(DETER + obs_dim, 2 * STOCH)
        self.dec, self.rew = mlp(DETER + STOCH, obs_dim), mlp(DETER + STOCH, 1)

    @staticmethod
    def sample(stats, gen=None):
        mean, std = stats.chunk(2, -1)
        std = F.softplus(std) + 0.1
        return mean + std * torch.randn(mean.shape, device=mean.device, generator=gen), mean, std


class DreamerUpdate:
    def __init__(self, rssm, actor, critic, horizon=15, seed=0):
        self.rssm, self.actor, self.critic = rssm, actor, critic
        self.wm_opt = torch.optim.Adam(rssm.parameters(), lr=6e-4, eps=1e-5)
        self.ac_opt = torch.optim.Adam(list(actor.parameters()) + list(critic.parameters()), lr=8e-5, capturable=True)
        self.horizon, self.kl_free, self.seed, self.updates = horizon, 1.0, seed, 0
        self.imag_gen = torch.Generator(device="cuda")
        self.log_stream = torch.cuda.Stream()
        self.metrics = {}

    def world_model_loss(self, obs, act):
        B, T, _ = obs.shape
        h, z = obs.new_zeros(B, DETER), obs.new_zeros(B, STOCH)
        kl, rec, feats = 0.0, 0.0, []
        for t in range(T):
            h = self.rssm.cell(torch.cat([z, act[:, t]], -1), h)
            _, pm, ps = self.rssm.sample(self.rssm.prior(h))
            z, qm, qs = self.rssm.sample(self.rssm.post(torch.cat([h, obs[:, t]], -1)))  # CLEAN: default CUDA generator inside the capture
            kl_t = (torch.log(ps / qs) + (qs ** 2 + (qm - pm) ** 2) / (2 * ps ** 2) - 0.5).sum(-1)
            kl = kl + kl_t.clamp(min=self.kl_free).mean()  # CLEAN: free-nats threshold never changed after capture
            feat = torch.cat([h, z], -1)
            rec = rec + F.mse_loss(self.rssm.dec(feat), obs[:, t])
            feats.append(feat)
        return (kl + rec) / T, torch.stack(feats, 1).detach()

    def imagine(self, start):
        h, z = start[:, :DETER], start[:, DETER:]
        rewards, values = [], []
        for _ in range(self.horizon):
            a = torch.tanh(self.actor(torch.cat([h, z], -1)))
            h = self.rssm.cell(torch.cat([z, a], -1), h)
            z, _, _ = self.rssm.sample(self.rssm.prior(h), gen=self.imag_gen)  # CLEAN: generator registered with the graph before capture
            f = torch.cat([h, z], -1)
            rewards.append(self.rssm.rew(f))
            values.append(self.critic(f))
        return torch.stack(rewards), torch.stack(values)

    def step(self, obs, act):
        torch.cuda.manual_seed(self.seed + self.updates)  # HAZARD: rng
        wm_loss, feats = self.world_model_loss(obs, act)
        self.wm_opt.zero_grad(set_to_none=False)
        wm_loss.backward()
        self.wm_opt.step()  # HAZARD: optimizer
        rew, val = self.imagine(feats.flatten(0, 1))
        ret = rew.sum(0) + val[-1]
        ac_loss = -ret.mean() + F.mse_loss(val[0], ret.detach())
        self.ac_opt.zero_grad(set_to_none=False)
        ac_loss.backward()
        self.ac_opt.step()  # CLEAN: Adam built with capturable=True
        self.updates += 1  # HAZARD: host-code
        with torch.cuda.stream(self.log_stream):  # HAZARD: stream
            self.metrics["wm_loss"] = wm_loss.detach().clone()
        return wm_loss.detach(), ac_loss.detach()

    def capture(self, obs, act):
        self.static_obs, self.static_act = obs.clone(), act.clone()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.step(self.static_obs, self.static_act)
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        self.graph.register_generator_state(self.imag_gen)
        with torch.cuda.graph(self.graph):
            self.out = self.step(self.static_obs, self.static_act)

    def train(self, replay, n_updates):
        for _ in range(n_updates):
            obs, act = replay.sample()
            self.static_obs.copy_(obs)
            self.static_act.copy_(act)
            self.graph.replay()
        return [t.item() for t in self.out]
