"""QMIX learner for cooperative multi-agent micromanagement (SMAC-style episodes).

Per-agent recurrent Q-networks are unrolled over a padded episode batch and mixed by a
monotonic hypernetwork conditioned on the global state. The learner step is captured on
its first call and replayed for every sampled episode batch.
"""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F


class AgentRNN(nn.Module):
    def __init__(self, obs_dim, n_actions, hidden=64):
        super().__init__()
        self.fc1 = nn.Linear(obs_dim, hidden)
        self.rnn = nn.GRUCell(hidden, hidden)
        self.fc2 = nn.Linear(hidden, n_actions)

    def forward(self, obs, h):
        h = self.rnn(F.relu(self.fc1(obs)), h)
        return self.fc2(h), h


class QMixer(nn.Module):
    def __init__(self, n_agents, state_dim, embed=32):
        super().__init__()
        self.n_agents, self.embed = n_agents, embed
        self.hyper_w1 = nn.Sequential(nn.Linear(state_dim, 64), nn.ReLU(), nn.Linear(64, n_agents * embed))
        self.hyper_b1 = nn.Linear(state_dim, embed)
        self.hyper_w2 = nn.Sequential(nn.Linear(state_dim, 64), nn.ReLU(), nn.Linear(64, embed))
        self.v = nn.Sequential(nn.Linear(state_dim, embed), nn.ReLU(), nn.Linear(embed, 1))

    def forward(self, agent_qs, state):
        B, T, _ = agent_qs.shape
        w1 = self.hyper_w1(state).abs().view(B, T, self.n_agents, self.embed)
        hidden = F.elu(torch.einsum("bta,btae->bte", agent_qs, w1) + self.hyper_b1(state))
        w2 = self.hyper_w2(state).abs()
        return (hidden * w2).sum(-1) + self.v(state).squeeze(-1)


class QMixLearner:
    def __init__(self, n_agents, obs_dim, state_dim, n_actions, state_std, T=120, B=32, seed=0):
        self.agent = AgentRNN(obs_dim, n_actions).cuda()
        self.mixer = QMixer(n_agents, state_dim).cuda()
        self.target_agent, self.target_mixer = copy.deepcopy(self.agent), copy.deepcopy(self.mixer)
        self.params = list(self.agent.parameters()) + list(self.mixer.parameters())
        self.opt = torch.optim.Adam(self.params, lr=5e-4)
        self.state_std = torch.as_tensor(state_std, dtype=torch.float32)
        self.seed, self.episode = seed, 0
        z = lambda *s, **kw: torch.zeros(*s, device="cuda", **kw)
        self.batch = {"obs": z(B, T + 1, n_agents, obs_dim), "state": z(B, T + 1, state_dim),
                      "actions": z(B, T, n_agents, 1, dtype=torch.long), "avail": z(B, T + 1, n_agents, n_actions),
                      "reward": z(B, T), "terminated": z(B, T), "mask": z(B, T)}
        self.graph = None

    def _unroll(self, agent, obs):
        B, T1, N, D = obs.shape
        h = torch.zeros(B * N, agent.rnn.hidden_size, device="cuda")
        qs = []
        for t in range(T1):  # CLEAN: episode limit fixed by the padded batch
            q, h = agent(obs[:, t].reshape(B * N, D), h)
            qs.append(q.view(B, N, -1))
        return torch.stack(qs, 1)

    def _train_step(self):
        b = self.batch
        torch.cuda.manual_seed(self.seed + self.episode)  # HAZARD: rng
        state = b["state"] / self.state_std.cuda()  # HAZARD: pinned-memory
        q = self._unroll(self.agent, b["obs"])
        chosen = torch.gather(q[:, :-1], 3, b["actions"]).squeeze(3)  # CLEAN: gather with a CUDA index tensor
        with torch.no_grad():
            tq = self._unroll(self.target_agent, b["obs"])
            q_avail = q.detach().masked_fill(b["avail"] == 0, -1e9)  # CLEAN: masked_fill instead of mask indexing
            best = q_avail[:, 1:].argmax(3, keepdim=True)
            target_max = torch.gather(tq[:, 1:], 3, best).squeeze(3)
            y = b["reward"] + 0.99 * (1 - b["terminated"]) * self.target_mixer(target_max, state[:, 1:])
        q_tot = self.mixer(F.dropout(chosen, 0.1, training=True), state[:, :-1])
        td = (q_tot - y) * b["mask"]
        loss = td.pow(2).sum() / b["mask"].sum()
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, 10.0)  # CLEAN: norm computed and applied on the device
        self.opt.step()  # HAZARD: optimizer
        return loss.detach()

    def train(self, episode_batch, episode):
        for k, v in episode_batch.items():
            self.batch[k].copy_(v)
        self.episode = episode
        if self.graph is None:
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):  # HAZARD: api-misuse
                self.loss = self._train_step()
        self.graph.replay()
        if episode % 200 == 0:
            self.target_agent.load_state_dict(self.agent.state_dict())  # CLEAN: load_state_dict copies in place, addresses unchanged
            self.target_mixer.load_state_dict(self.mixer.state_dict())
        return self.loss
