"""Learned crowd steering for the stadium concourse level.

Up to 2048 ambient agents walk toward nav-mesh goals. A small policy looks
at each agent's goal direction and its K nearest neighbours and outputs a
desired velocity; the game thread integrates positions. The simulation tick
runs at 30 Hz and is replayed from one CUDA graph.
"""
import numpy as np
import torch
import torch.nn as nn

MAX_AGENTS, K_NN, DT = 2048, 8, 1.0 / 30.0


class SteeringPolicy(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.nbr = nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.head = nn.Sequential(nn.Linear(hidden + 4, hidden), nn.ReLU(), nn.Linear(hidden, 2))

    def forward(self, goal_dir, vel, rel):
        agg = self.nbr(rel).max(dim=1).values
        return torch.tanh(self.head(torch.cat([agg, goal_dir, vel], dim=-1))) * 1.6


class CrowdSim:
    def __init__(self, policy, nav_goals, exits):
        self.policy = policy.cuda().eval()
        self.exits_np = exits.astype(np.float32)
        self.goal_pinned = torch.from_numpy(nav_goals.astype(np.float32)).pin_memory()
        self.goal = torch.zeros(MAX_AGENTS, 2, device="cuda")
        self.pos = torch.rand(MAX_AGENTS, 2, device="cuda") * 100.0
        self.vel = torch.zeros(MAX_AGENTS, 2, device="cuda")
        self.debug_pos = torch.zeros(MAX_AGENTS, 2, device="cuda")
        self.n_active = 1024
        self.debug_stream = torch.cuda.Stream()

    def spawn(self, n):
        self.n_active = min(MAX_AGENTS, self.n_active + n)

    def _tick(self):
        self.goal.copy_(self.goal_pinned, non_blocking=True)  # CLEAN: pinned H2D copy is recorded in the graph
        exits = torch.from_numpy(self.exits_np).to("cuda")  # HAZARD: pinned-memory
        n = self.n_active  # HAZARD: python-scalar
        pos, vel = self.pos[:n], self.vel[:n]
        d = torch.cdist(pos, pos)
        d = d.masked_fill(torch.eye(n, dtype=torch.bool, device="cuda"), float("inf"))  # CLEAN: fixed-shape self-exclusion
        knn_d, knn_i = d.topk(K_NN, dim=1, largest=False)  # CLEAN: fixed-K neighbours instead of a radius query
        crowded = (knn_d[:, 0] < 0.4).nonzero().squeeze(1)  # HAZARD: dynamic-shape
        rel = torch.cat([pos[knn_i] - pos[:, None], vel[knn_i] - vel[:, None]], dim=-1)
        nearest_exit = exits[torch.cdist(pos, exits).argmin(dim=1)]
        to_goal = 0.9 * (self.goal[:n] - pos) + 0.1 * (nearest_exit - pos)
        goal_dir = to_goal / to_goal.norm(dim=-1, keepdim=True).clamp(min=1e-3)
        v_new = self.policy(goal_dir, vel, rel)
        v_new[crowded] *= 0.5
        self.vel[:n].copy_(v_new)
        self.pos[:n].add_(v_new * DT)
        with torch.cuda.stream(self.debug_stream):  # HAZARD: stream
            self.debug_pos.copy_(self.pos)

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.no_grad():
            for _ in range(3):
                self._tick()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(self.graph):
            self._tick()

    def step(self, new_goals=None):
        if new_goals is not None:
            self.goal_pinned.copy_(torch.from_numpy(new_goals))
        self.graph.replay()


if __name__ == "__main__":
    goals = np.random.uniform(0, 100, (MAX_AGENTS, 2))
    exits = np.array([[0.0, 50.0], [100.0, 50.0], [50.0, 0.0], [50.0, 100.0]])
    sim = CrowdSim(SteeringPolicy(), goals, exits)
    sim.capture()
    for frame in range(30 * 60 * 5):
        sim.step(goals if frame % 90 == 0 else None)
        if frame % 300 == 0:
            sim.spawn(128)
        if frame % 30 == 0:
            snapshot = sim.pos.cpu()  # CLEAN: host read between replays, not inside the graph
