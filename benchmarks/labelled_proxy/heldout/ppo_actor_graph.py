import numpy as np
import torch
import torch.nn as nn


class ActorCritic(nn.Module):
    def __init__(self, obs_dim, n_actions, hidden=256):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.pi = nn.Linear(hidden, n_actions)
        self.v = nn.Linear(hidden, 1)

    def forward(self, obs):
        h = self.body(obs)
        return self.pi(h), self.v(h).squeeze(-1)


def gumbel_argmax(logits):
    u = torch.rand_like(logits).clamp_(1e-6, 1 - 1e-6)
    return (logits - torch.log(-torch.log(u))).argmax(-1)


class GraphedActor:
    """Replays the acting step for a fixed number of vectorised envs."""

    def __init__(self, net, n_envs, obs_dim, obs_mean: np.ndarray, epsilon=0.05):
        self.net = net
        self.epsilon = epsilon
        self.obs_mean = obs_mean
        self.static_obs = torch.zeros(n_envs, obs_dim, device="cuda")
        self.graph = torch.cuda.CUDAGraph()
        self.trajectory = []
        self._build()

    def _act(self):
        mean = torch.as_tensor(self.obs_mean, dtype=torch.float32, device="cuda")  # HAZARD: pinned-memory
        obs = self.static_obs - mean
        logits, value = self.net(obs)
        if obs.abs().max() > 10.0:  # HAZARD: dynamic-control-flow
            logits = logits.clamp(-20.0, 20.0)
        action = gumbel_argmax(logits)
        if np.random.rand() < self.epsilon:  # HAZARD: host-code
            action = torch.randint_like(action, logits.shape[-1])
        return action, value

    @torch.no_grad()
    def _build(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._act()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph):
            self.action, self.value = self._act()

    def step(self, obs_np: np.ndarray):
        self.static_obs.copy_(torch.from_numpy(obs_np))  # CLEAN: host->device copy into the static input happens before replay, outside capture
        self.graph.replay()
        self.trajectory.append((self.action, self.value))  # HAZARD: static-address
        return self.action.cpu().numpy()  # CLEAN: device->host read after replay, outside the region


class GraphedCriticUpdate:
    def __init__(self, net: ActorCritic, batch: int, obs_dim: int, lr: float = 3e-4):
        self.net = net
        self.opt = torch.optim.Adam(net.parameters(), lr=lr)
        self.obs = torch.zeros(batch, obs_dim, device="cuda")
        self.returns = torch.zeros(batch, device="cuda")
        self.graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._update()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph):
            self.loss = self._update()

    def _update(self):
        _, value = self.net(self.obs)
        loss = 0.5 * (value - self.returns).pow(2).mean()
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.opt.step()  # HAZARD: optimizer
        return loss.detach()


def rollout(env, actor: GraphedActor, horizon=128):
    obs = env.reset()
    for _ in range(horizon):
        actions = actor.step(obs)
        obs, reward, done, info = env.step(actions)
    return actor.trajectory
