"""Double-DQN agent: acting and TD targets are compiled with CUDA graphs."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F


class QNet(nn.Module):
    def __init__(self, obs_dim=128, n_actions=18, hidden=512):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, n_actions))

    def forward(self, obs):
        return self.net(obs)


class DQNAgent:
    def __init__(self, obs_dim=128, n_actions=18, gamma=0.99, device="cuda"):
        self.q_net = QNet(obs_dim, n_actions).to(device)
        self.target = copy.deepcopy(self.q_net)
        self.n_actions, self.gamma = n_actions, gamma
        self.opt = torch.optim.Adam(self.q_net.parameters(), lr=6.25e-5, eps=1.5e-4)
        self.act_fn = torch.compile(self._act, mode="reduce-overhead")
        self.td_fn = torch.compile(self._td_target, backend="cudagraphs")

    def _act(self, obs, epsilon):
        q = self.q_net(obs)
        greedy = q.argmax(-1)
        rand_a = torch.randint_like(greedy, self.n_actions)  # CLEAN: device RNG inside a CUDA-graph compile
        explore = torch.rand(obs.shape[0], device=obs.device) < epsilon  # HAZARD: python-scalar
        return torch.where(explore, rand_a, greedy)

    def _td_target(self, next_obs, rewards, dones):
        best_next = self.q_net(next_obs).argmax(-1, keepdim=True)
        q_next = self.target(next_obs).gather(-1, best_next).squeeze(-1)
        self.terminal_q = q_next[dones > 0]  # HAZARD: dynamic-shape
        if dones.any():  # HAZARD: dynamic-control-flow
            q_next = q_next * (1.0 - dones.float())
        return rewards + self.gamma * q_next  # CLEAN: gamma is fixed for the whole run

    def hard_sync(self):
        self.target.load_state_dict(self.q_net.state_dict())  # CLEAN: load_state_dict copies into the existing parameters

    def soft_sync(self, tau=0.005):
        for tp, p in zip(self.target.parameters(), self.q_net.parameters()):
            tp.data = (1 - tau) * tp.data + tau * p.data  # HAZARD: static-address

    def learn(self, batch):
        obs, actions, rewards, next_obs, dones = (t.cuda(non_blocking=True) for t in batch)
        with torch.no_grad():
            target = self.td_fn(next_obs, rewards, dones)
        q = self.q_net(obs).gather(-1, actions[:, None]).squeeze(-1)
        loss = F.smooth_l1_loss(q, target)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return loss.item()


def run(env, agent, steps=1_000_000, eps_start=1.0, eps_end=0.01, decay=250_000):
    obs = torch.as_tensor(env.reset()[0], device="cuda")
    for t in range(steps):
        epsilon = max(eps_end, eps_start - (eps_start - eps_end) * t / decay)
        with torch.no_grad():
            action = agent.act_fn(obs, epsilon)
        nxt, rew, term, trunc, _ = env.step(action.cpu().numpy())
        obs = torch.as_tensor(nxt, device="cuda")
        if t % 4 == 0:
            agent.soft_sync()
