"""Vectorised bandit/env rollout captured as one CUDA graph per policy update."""
import random

import numpy as np
import torch
import torch.nn as nn


class Policy(nn.Module):
    def __init__(self, obs_dim=32, n_actions=6):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, 128), nn.ReLU(), nn.Linear(128, n_actions))
        self.epsilon = 1.0

    def act(self, obs, gen):
        q = self.net(obs)
        greedy = q.argmax(-1)
        explore = torch.rand(obs.shape[0], device=obs.device, generator=gen) < self.epsilon  # HAZARD: python-scalar
        rand_a = torch.randint(0, q.shape[-1], greedy.shape, device=obs.device, generator=gen)
        return torch.where(explore, rand_a, greedy)


def rollout(policy, obs, gen, horizon=16, seed=None):
    if seed is not None:  # CLEAN: None check on an int argument
        torch.manual_seed(seed)  # HAZARD: rng
    rewards = torch.zeros(obs.shape[0], device=obs.device)
    for t in range(horizon):
        a = policy.act(obs, gen)
        noise_scale = random.random() * 0.01  # HAZARD: host-code
        obs = obs + noise_scale * torch.randn_like(obs)
        obs = obs + torch.from_numpy(np.random.randn(*obs.shape).astype("float32")).cuda()  # HAZARD: pinned-memory
        rewards += (a == t % 6).float()
    return obs, rewards


def main(n_envs=4096, updates=500):
    policy = Policy().cuda()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(7)
    static_obs = torch.randn(n_envs, 32, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        rollout(policy, static_obs, gen)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    g.register_generator_state(gen)
    with torch.no_grad(), torch.cuda.graph(g):
        state = torch.cuda.get_rng_state()  # HAZARD: rng
        out_obs, out_rew = rollout(policy, static_obs, gen, seed=0)
        torch.cuda.set_rng_state(state)  # HAZARD: rng
    for u in range(updates):
        policy.epsilon = max(0.05, 1.0 - u / 300)
        g.replay()
        static_obs.copy_(out_obs)
        if u % 50 == 0:
            print(u, out_rew.mean().item())
