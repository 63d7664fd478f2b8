"""Attention-model policy for capacitated vehicle routing (last-mile delivery); greedy rollout captured as a graph."""
import time
import torch
import torch.nn as nn
import torch.nn.functional as F

class DepotMixin:
    def depot_context(self, nodes):
        return nodes[:, :1]  # CLEAN: static slice of the depot row
    def visited_clusters(self, route):
        return torch.unique(route, dim=1)  # HAZARD: dynamic-shape

class ClockMixin:
    def stamp(self):
        self.decode_started = time.monotonic()  # HAZARD: host-code

class SamplingMixin:
    def pick(self, logits):
        return logits.argmax(-1)  # CLEAN: greedy decoding stays on device
    def pick_stochastic(self, logits):
        return torch.multinomial(F.softmax(logits, -1), 1, generator=self.gen).squeeze(-1)  # HAZARD: rng

class AttentionPolicy(DepotMixin, ClockMixin, SamplingMixin, nn.Module):
    def __init__(self, d=128, stochastic=False):
        super().__init__()
        self.enc = nn.Linear(3, d)
        self.q = nn.Linear(2 * d, d)
        self.stochastic = stochastic
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(1234)
    def step_logits(self, h, ctx, visited):
        scores = (h @ self.q(ctx).unsqueeze(-1)).squeeze(-1) / h.shape[-1] ** 0.5
        return scores.masked_fill(visited, float("-inf"))  # CLEAN: masked_fill, no data-dependent shape
    def forward(self, nodes, steps):
        self.stamp()
        h = self.enc(nodes)
        visited = torch.zeros(nodes.shape[:2], dtype=torch.bool, device=nodes.device)
        visited[:, 0] = True
        cur = self.depot_context(h).squeeze(1)
        route = []
        for _ in range(steps):
            logits = self.step_logits(h, torch.cat([cur, h.mean(1)], -1), visited)
            nxt = self.pick_stochastic(logits) if self.stochastic else self.pick(logits)
            visited = visited.scatter(1, nxt.unsqueeze(1), True)
            cur = h.gather(1, nxt[:, None, None].expand(-1, 1, h.shape[-1])).squeeze(1)
            route.append(nxt)
        route = torch.stack(route, 1)
        return route, self.visited_clusters(route)

class RolloutRunner:
    def __init__(self, policy, batch=256):
        self.policy, self.batch = policy.cuda().eval(), batch
        self.g = torch.cuda.CUDAGraph()
    @torch.no_grad()
    def build(self, n_customers):
        self.nodes = torch.zeros(self.batch, n_customers + 1, 3, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                self.policy(self.nodes, n_customers)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.g):  # HAZARD: api-misuse
            self.route, self.clusters = self.policy(self.nodes, n_customers)
    def solve(self, nodes):
        if not hasattr(self, "nodes") or nodes.shape[1] != self.nodes.shape[1]:
            self.build(nodes.shape[1] - 1)
        self.nodes.copy_(nodes)  # CLEAN: copy_ into the captured node features
        self.g.replay()
        return self.route.clone()

def dispatch(days, stochastic=False):
    runner = RolloutRunner(AttentionPolicy(stochastic=stochastic))
    return [runner.solve(nodes.cuda()) for nodes in days]
