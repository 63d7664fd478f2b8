"""Vectorised-env rollout: the policy's act() is captured once and replayed per env step."""
import random

import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical


class ActorCritic(nn.Module):
    def __init__(self, obs_dim, n_act, hidden=256):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.pi = nn.Linear(hidden, n_act)
        self.v = nn.Linear(hidden, 1)

    def forward(self, obs):
        h = self.body(obs)
        return self.pi(h), self.v(h).squeeze(-1)


class GraphedRollout:
    def __init__(self, net, n_envs, obs_dim, eps_greedy=0.05, device="cuda"):
        self.net = net
        self.static_obs = torch.zeros(n_envs, obs_dim, device=device)
        self.host_obs = torch.zeros(n_envs, obs_dim).pin_memory()
        self.eps_greedy = eps_greedy
        self.total_env_steps = 0
        self.explore_gen = torch.Generator(device=device)
        self.explore_gen.manual_seed(17)
        self.graph = torch.cuda.CUDAGraph()
        self.out = None

    @torch.no_grad()
    def _act(self):
        logits, value = self.net(self.static_obs)
        dist = Categorical(logits=logits)  # HAZARD: host-sync
        action = dist.sample()  # CLEAN: multinomial on the default CUDA generator is capturable
        if random.random() < self.eps_greedy:  # HAZARD: host-code
            action = torch.zeros_like(action)
        noise_a = torch.randint(0, logits.shape[-1], action.shape, device=action.device, generator=self.explore_gen)  # HAZARD: rng
        sticky = torch.rand(action.shape, device=action.device) < 0.25
        action = torch.where(sticky, noise_a, action)
        self.total_env_steps += self.static_obs.shape[0]  # HAZARD: host-code
        logp = logits.log_softmax(-1).gather(-1, action.unsqueeze(-1)).squeeze(-1)
        return action, logp, value

    @torch.no_grad()
    def _value_only(self, obs):
        logits, value = self.net(obs)
        with torch.random.fork_rng(devices=[obs.device]):  # CLEAN: fork_rng only reads the CUDA RNG state and restores the same state
            ent = Categorical(logits=logits, validate_args=False).entropy()  # CLEAN: validation disabled, no host check
        return value, ent

    def build(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._act()
                self._value_only(self.static_obs)
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph):
            self.out = self._act()
            self.bootstrap = self._value_only(self.static_obs)

    def step(self, obs_np: np.ndarray):
        self.host_obs.numpy()[:] = obs_np  # CLEAN: staging buffer refilled on the host before each replay
        self.static_obs.copy_(self.host_obs, non_blocking=True)
        self.graph.replay()
        action, logp, value = self.out
        return action.cpu().numpy(), logp.clone(), value.clone()


def collect(envs, net, horizon=128):
    runner = GraphedRollout(net.cuda(), envs.num_envs, envs.single_observation_space.shape[0])
    runner.build()
    obs, _ = envs.reset(seed=0)
    traj = []
    for _ in range(horizon):
        act, logp, val = runner.step(obs)
        obs, rew, term, trunc, _ = envs.step(act)
        traj.append((logp, val, torch.as_tensor(rew)))
    return traj
