"""Random Network Distillation (RND) exploration bonus for a vectorised Atari PPO agent.

The stages (observation whitening, bonus, predictor loss) are registered by name and all
compiled with backend="cudagraphs" when the module is built.
"""
import numpy as np
import torch
import torch.nn as nn

STAGES = {}


def register(name, **compile_kw):
    def deco(fn):
        STAGES[name] = (fn, compile_kw)
        return fn
    return deco


def build(stages=STAGES):
    return {name: torch.compile(fn, **kw) for name, (fn, kw) in stages.items()}


def conv_net(out=512):
    return nn.Sequential(nn.Conv2d(1, 32, 8, 4), nn.LeakyReLU(), nn.Conv2d(32, 64, 4, 2), nn.LeakyReLU(),
                         nn.Conv2d(64, 64, 3, 1), nn.LeakyReLU(), nn.Flatten(), nn.Linear(3136, out))


@register("whiten_", backend="cudagraphs")
def whiten_(obs, mean, var):
    obs.sub_(mean).div_(var.sqrt() + 1e-8).clamp_(-5.0, 5.0)  # HAZARD: static-address
    return obs


@register("whiten", backend="cudagraphs")
def whiten(obs, mean, var):
    return ((obs - mean) / (var.sqrt() + 1e-8)).clamp(-5.0, 5.0)  # CLEAN: out-of-place, the input is left untouched


@register("bonus", backend="cudagraphs")
def bonus(obs_w, target, predictor):
    with torch.no_grad():
        tgt = target(obs_w)
    err = (predictor(obs_w) - tgt).pow(2).mean(-1)
    err = err + np.random.normal(0.0, 1e-4)  # HAZARD: host-code
    if err.max() > 50.0:  # HAZARD: dynamic-control-flow
        err = err.clamp(max=50.0)
    return err


@register("predictor_loss", backend="cudagraphs")
def predictor_loss(obs_w, target, predictor, keep_mask):
    with torch.no_grad():
        tgt = target(obs_w)
    per = (predictor(obs_w) - tgt).pow(2).mean(-1)
    return (per * keep_mask).sum() / keep_mask.sum().clamp_min(1.0)


class RNDModule:
    def __init__(self, n_envs=128, update_proportion=0.25):
        self.target = conv_net().cuda().requires_grad_(False)
        self.predictor = conv_net().cuda()
        self.opt = torch.optim.Adam(self.predictor.parameters(), lr=1e-4)
        self.mean = torch.zeros(1, 1, 84, 84, device="cuda")
        self.var = torch.ones(1, 1, 84, 84, device="cuda")
        self.n_envs, self.update_proportion = n_envs, update_proportion
        self.fns = build()

    @torch.no_grad()
    def intrinsic_reward(self, next_obs):
        obs_w = self.fns["whiten"](next_obs, self.mean, self.var).clone()  # CLEAN: cloned before the next compiled stage
        return self.fns["bonus"](obs_w, self.target, self.predictor).clone()  # CLEAN: all envs, fixed batch size

    @torch.no_grad()
    def reward_alive(self, next_obs, alive):
        obs_w = self.fns["whiten"](next_obs, self.mean, self.var)[alive]
        return self.fns["bonus"](obs_w, self.target, self.predictor).clone()  # HAZARD: dynamic-shape

    @torch.no_grad()
    def update_stats(self, batch_mean, batch_var, count, total):
        delta = batch_mean - self.mean
        self.mean.copy_(self.mean + delta * count / (total + count))  # CLEAN: running stats updated in place
        self.var.copy_((self.var * total + batch_var * count) / (total + count))

    def train_predictor(self, rollout_obs):
        for mb in rollout_obs.split(self.n_envs):
            obs_w = self.fns["whiten_"](mb, self.mean, self.var)
            keep = (torch.rand(mb.shape[0], device="cuda") < self.update_proportion).float()
            loss = self.fns["predictor_loss"](obs_w, self.target, self.predictor, keep)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
