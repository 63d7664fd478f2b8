"""Distributed OpenAI-ES for a legged-robot controller: every rank perturbs the policy with
slices of a shared noise table, rolls out episodes with a compiled policy (reduce-overhead),
and the per-rank fitness values are all-gathered for the centred-rank update."""
import random

import torch
import torch.distributed as dist

OBS, ACT, HID = 48, 12, 256


class NoiseTable:
    def __init__(self, size=25_000_000, seed=123):
        g = torch.Generator(device="cuda")
        g.manual_seed(seed)  # CLEAN: same seed on every rank, drawn once eagerly at start-up
        self.noise = torch.randn(size, generator=g, device="cuda")

    def get(self, offset, n):
        return self.noise[offset:offset + n]


class ESPolicy:
    def __init__(self, table, sigma=0.02):
        self.n = OBS * HID + HID * ACT
        self.theta = torch.zeros(self.n, device="cuda")
        self.table, self.sigma = table, sigma
        self.act = torch.compile(self._act, mode="reduce-overhead")

    def _act(self, obs, offset_t, sign):
        if torch.isnan(obs).any():  # HAZARD: dynamic-control-flow
            obs = torch.zeros_like(obs)
        off = random.randint(0, self.table.noise.numel() - self.n)  # HAZARD: host-code
        eps = self.table.noise.narrow(0, off, self.n)
        w = self.theta + self.sigma * sign * eps  # HAZARD: python-scalar
        w1 = w[: OBS * HID].view(OBS, HID)
        w2 = w[OBS * HID:].view(HID, ACT)
        return torch.tanh(torch.tanh(obs @ w1) @ w2)


def rollout(policy, env, horizon=1000):
    obs = env.reset()
    ret = torch.zeros(env.num_envs, device="cuda")
    traj = []
    for t in range(horizon):
        a = policy.act(obs, None, 1.0)
        traj.append(a)  # HAZARD: static-address
        obs, r, done = env.step(a.clone())  # CLEAN: action cloned before it leaves the graph pool
        ret += r * (~done)
        if done.all():  # CLEAN: eager loop, outside the compiled policy
            break
    return ret, traj


def centred_ranks(x):
    r = torch.empty_like(x)
    r[torch.argsort(x)] = torch.arange(x.numel(), device=x.device, dtype=x.dtype)  # CLEAN: eager ranking of gathered fitness
    return r / (x.numel() - 1) - 0.5


def es_update(policy, fitness_local, offsets_local, lr=0.01):
    world = dist.get_world_size()
    fit_all = fitness_local.new_empty(world * fitness_local.numel())
    dist.all_gather_into_tensor(fit_all, fitness_local)
    off_all = offsets_local.new_empty(world * offsets_local.numel())
    dist.all_gather_into_tensor(off_all, offsets_local)
    w = centred_ranks(fit_all)
    grad = torch.zeros_like(policy.theta)
    for k, off in enumerate(off_all.tolist()):
        grad.add_(policy.table.get(off, policy.n), alpha=float(w[k]))
    policy.theta.add_(grad, alpha=lr / (fit_all.numel() * policy.sigma))


def train(policy, env, generations=500):
    for gen in range(generations):
        policy.sigma = 0.02 * (0.995 ** gen)
        ret, _ = rollout(policy, env)
        offsets = torch.randint(0, policy.table.noise.numel() - policy.n, (1,), device="cuda")
        es_update(policy, ret.mean()[None], offsets)
