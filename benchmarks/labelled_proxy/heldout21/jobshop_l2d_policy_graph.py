"""L2D-style dispatching policy for job-shop scheduling (GIN on the disjunctive graph). The numpy
environment stays on the host; only the policy forward is replayed as a CUDA graph, one pair of
graphs (greedy / sampling) per instance size, all in one pool. Adapted from a forum answer on
"RL rollouts are launch-bound with small GNNs"."""
import time

import numpy as np
import torch
import torch.nn as nn


class GINLayer(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.eps = nn.Parameter(torch.zeros(1))
        self.mlp = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))

    def forward(self, h, adj):
        return torch.relu(self.mlp((1 + self.eps) * h + adj @ h))


class Policy(nn.Module):
    def __init__(self, d=64, layers=3):
        super().__init__()
        self.inp = nn.Linear(2, d)
        self.gin = nn.ModuleList(GINLayer(d) for _ in range(layers))
        self.actor = nn.Sequential(nn.Linear(2 * d, d), nn.Tanh(), nn.Linear(d, 1))

    def forward(self, feat, adj, cand):
        h = self.inp(feat)
        for layer in self.gin:
            h = layer(h, adj)
        g = h.mean(0, keepdim=True).expand(cand.shape[0], -1)
        return self.actor(torch.cat([h.index_select(0, cand), g], -1)).squeeze(-1)  # CLEAN: index_select with a CUDA index


class GraphedRollout:
    def __init__(self, policy, n_j, n_m, dur_max, pool, device="cuda"):
        N = n_j * n_m
        self.policy, self.pool, self.dev = policy, pool, device
        self.dur_max = dur_max                               # numpy (n_j,) longest op per job
        self.s_feat = torch.zeros(N, 2, device=device)
        self.s_adj = torch.zeros(N, N, device=device)
        self.s_cand = torch.zeros(n_j, dtype=torch.long, device=device)
        self.s_mask = torch.zeros(n_j, dtype=torch.bool, device=device)   # True = job finished
        self.g_action = torch.zeros((), dtype=torch.long, device=device)
        self.s_action = torch.zeros(1, dtype=torch.long, device=device)
        self.gen, self.stamps = torch.Generator(device=device), []

    def _logits(self):
        scale = torch.from_numpy(self.dur_max).float().cuda()  # HAZARD: pinned-memory
        feat = self.s_feat / scale.repeat_interleave(self.s_feat.shape[0] // scale.shape[0])[:, None]  # CLEAN: repeat count is a Python int, output size known
        return self.policy(feat, self.s_adj, self.s_cand)

    def _greedy(self):
        logits = self._logits().clone()
        logits[self.s_mask] = float("-inf")  # CLEAN: bool-mask assignment of a scalar is capturable
        self.g_action.copy_(logits.argmax())

    def _sample(self):
        self.stamps.append(time.perf_counter())  # HAZARD: host-code
        logits = self._logits()
        feasible = (~self.s_mask).nonzero().squeeze(1)  # HAZARD: dynamic-shape
        probs = torch.softmax(logits[feasible], 0)
        pick = torch.multinomial(probs, 1, generator=self.gen)  # HAZARD: rng
        self.s_action.copy_(feasible[pick])

    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._greedy()
                self._sample()
        torch.cuda.current_stream().wait_stream(s)
        self.g_greedy, self.g_sample = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.g_greedy, pool=self.pool):
            self._greedy()
        with torch.cuda.graph(self.g_sample, pool=self.pool):
            self._sample()

    @torch.no_grad()
    def rollout(self, env, greedy=True):
        state = env.reset()
        graph, out = (self.g_greedy, self.g_action) if greedy else (self.g_sample, self.s_action)
        while not env.done():
            self.s_feat.copy_(torch.from_numpy(state.feat))
            self.s_adj.copy_(torch.from_numpy(state.adj))
            self.s_cand.copy_(torch.from_numpy(state.candidates))
            self.s_mask.copy_(torch.from_numpy(state.finished))
            graph.replay()
            state = env.step(int(out))  # CLEAN: host read after the replay
        return env.makespan()


if __name__ == "__main__":
    from jssp_env import JSSPEnv, load_taillard
    policy = Policy().cuda().eval()
    policy.load_state_dict(torch.load("l2d_15x15.pt", weights_only=True))
    pool, runners = torch.cuda.graph_pool_handle(), {}
    for inst in load_taillard("ta01-ta30"):
        key = (inst.n_jobs, inst.n_machines)
        if key not in runners:
            runners[key] = GraphedRollout(policy, *key, inst.durations.max(1).astype(np.float32), pool)
            runners[key].capture()
        runners[key].dur_max = inst.durations.max(1).astype(np.float32)
        best = min(runners[key].rollout(JSSPEnv(inst), greedy=g) for g in (True, False, False, False))
        print(inst.name, best)
