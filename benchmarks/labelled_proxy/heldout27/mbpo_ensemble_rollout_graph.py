"""MBPO (Janner et al. 2019) branched model rollouts: a probabilistic ensemble of
dynamics models; the whole k-step rollout is captured once and replayed."""
import argparse
import numpy as np
import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--num_networks", type=int, default=7)
parser.add_argument("--num_elites", type=int, default=5)
parser.add_argument("--rollout_batch_size", type=int, default=50000)
parser.add_argument("--rollout_min_length", type=int, default=1)
parser.add_argument("--rollout_max_length", type=int, default=15)
parser.add_argument("--rollout_min_epoch", type=int, default=20)
parser.add_argument("--rollout_max_epoch", type=int, default=100)
parser.add_argument("--hidden", type=int, default=200)
args = parser.parse_args()

class StandardScaler:
    def fit(self, data):
        self.mu = np.mean(data, axis=0, keepdims=True)
        self.std = np.std(data, axis=0, keepdims=True)
        self.std[self.std < 1e-12] = 1.0

    def transform(self, data):
        mu, std = (torch.from_numpy(a).float().to(data.device) for a in (self.mu, self.std))  # HAZARD: pinned-memory
        return (data - mu) / std

class EnsembleFC(nn.Module):
    def __init__(self, n_in, n_out, E):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(E, n_in, n_out) * (1.0 / (2 * n_in ** 0.5)))
        self.bias = nn.Parameter(torch.zeros(E, 1, n_out))

    def forward(self, x):
        return torch.baddbmm(self.bias, x, self.weight)

class EnsembleModel(nn.Module):
    def __init__(self, obs_dim, act_dim, E):
        super().__init__()
        self.out_dim = obs_dim + 1
        self.net = nn.Sequential(EnsembleFC(obs_dim + act_dim, args.hidden, E), nn.SiLU(),
                                 EnsembleFC(args.hidden, args.hidden, E), nn.SiLU(), EnsembleFC(args.hidden, 2 * (obs_dim + 1), E))
        self.max_logvar = nn.Parameter(torch.ones(1, obs_dim + 1) / 2)
        self.min_logvar = nn.Parameter(-torch.ones(1, obs_dim + 1) * 10)

    def forward(self, x):
        mean, logvar = self.net(x).split(self.out_dim, dim=-1)
        logvar = self.max_logvar - nn.functional.softplus(self.max_logvar - logvar)
        return mean, self.min_logvar + nn.functional.softplus(logvar - self.min_logvar)

class FakeEnv:
    def __init__(self, model, scaler, elite_idxes):
        self.model, self.scaler = model, scaler
        self.elite_idxes = torch.tensor(elite_idxes, device="cuda")  # CLEAN: elite list uploaded once, outside the graph
        self.rollout_gen = torch.Generator(device="cuda")

    def step(self, obs, act):
        inputs = self.scaler.transform(torch.cat([obs, act], -1))
        mean, logvar = self.model(inputs[None].expand(args.num_networks, -1, -1))
        mean = torch.cat([mean[..., :1], mean[..., 1:] + obs], -1)
        samples = mean + torch.randn_like(mean) * torch.exp(0.5 * logvar)  # CLEAN: default CUDA generator is graph-safe
        pick = torch.randint(0, args.num_elites, (obs.size(0),), device=obs.device, generator=self.rollout_gen)  # HAZARD: rng
        sample = samples[self.elite_idxes[pick], torch.arange(obs.size(0), device=obs.device)]  # CLEAN: gather with CUDA indices
        rewards, next_obs = sample[:, :1], sample[:, 1:]
        return next_obs, rewards, self.termination_fn(next_obs)

    @staticmethod
    def termination_fn(next_obs):  # Hopper-v2, as in mbpo/static/hopper.py
        nx = next_obs.cpu().numpy()  # HAZARD: host-sync
        not_done = np.isfinite(nx).all(-1) * (np.abs(nx[:, 1:]) < 100).all(-1) * (nx[:, 0] > .7) * (np.abs(nx[:, 1]) < .2)
        return torch.from_numpy(~not_done[:, None]).to(next_obs.device)

class BranchedRollout:
    def __init__(self, fake_env, policy, obs_dim):
        self.env, self.policy, self.length = fake_env, policy, args.rollout_min_length
        self.static_obs = torch.zeros(args.rollout_batch_size, obs_dim, device="cuda")
        self.out_obs = torch.zeros(args.rollout_max_length, args.rollout_batch_size, obs_dim, device="cuda")

    def run(self):
        obs = self.static_obs
        for h in range(self.length):  # HAZARD: python-scalar
            next_obs, rew, term = self.env.step(obs, self.policy(obs))
            self.out_obs[h].copy_(next_obs)  # CLEAN: write into a preallocated static buffer
            obs = next_obs
        return obs

    def set_rollout_length(self, epoch):
        frac = min(max((epoch - args.rollout_min_epoch) / (args.rollout_max_epoch - args.rollout_min_epoch), 0), 1)
        self.length = int(args.rollout_min_length + frac * (args.rollout_max_length - args.rollout_min_length))

def capture(rollout):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(2):
            rollout.run()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), torch.no_grad():
        rollout.run()
    return g

def rollout_model(rollout, graph, env_pool, model_pool, epoch):
    rollout.set_rollout_length(epoch)
    rollout.static_obs.copy_(env_pool.sample_obs(args.rollout_batch_size))  # CLEAN: copy_ into the captured input
    graph.replay()
    model_pool.push(rollout.out_obs[:rollout.length].cpu().numpy())  # CLEAN: host read after the replay
