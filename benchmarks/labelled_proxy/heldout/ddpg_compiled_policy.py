import logging
from functools import partial

import torch
import torch.nn as nn

logger = logging.getLogger(__name__)

graph_compile = partial(torch.compile, mode="reduce-overhead", fullgraph=False)


class Actor(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden=256):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, act_dim), nn.Tanh())

    def forward(self, obs):
        return self.net(obs)


class CompiledPolicy:
    """Wraps an actor so that acting goes through a CUDA-graph compiled function."""

    def __init__(self, actor, obs_mean, obs_std, action_low=-1.0, action_high=1.0):
        self.actor = actor
        self.obs_mean, self.obs_std = obs_mean, obs_std
        self.low, self.high = action_low, action_high
        self.last_valid = True
        self._act = graph_compile(self._act_impl)

    def _act_impl(self, obs, noise_scale):
        obs.sub_(self.obs_mean).div_(self.obs_std)  # HAZARD: static-address
        mu = self.actor(obs)
        self.last_valid = bool(torch.isfinite(mu).all())  # HAZARD: host-sync
        action = mu + noise_scale * torch.randn_like(mu)  # HAZARD: python-scalar
        while (action.abs() > 1.5).any():  # HAZARD: dynamic-control-flow
            action = mu + 0.5 * (action - mu)
        logger.info("mean |a| = %s", action.abs().mean())  # HAZARD: host-code
        return action.clamp(self.low, self.high)  # CLEAN: bounds are fixed floats set once at construction

    @torch.no_grad()
    def act(self, obs, noise_scale):
        return self._act(obs, noise_scale)


def collect(env, policy: CompiledPolicy, steps=10_000, noise_start=0.3, noise_end=0.05):
    buffer = []
    obs = env.reset()
    for t in range(steps):
        noise = noise_start + (noise_end - noise_start) * t / steps
        obs_t = torch.as_tensor(obs, dtype=torch.float32, device="cuda")  # CLEAN: host->device copy in the eager loop, outside the compiled function
        action = policy.act(obs_t, noise)
        buffer.append((obs_t, action.clone()))  # CLEAN: action cloned before the next compiled call
        obs, reward, done, _ = env.step(action.cpu().numpy())
        if done:
            obs = env.reset()
    return buffer
