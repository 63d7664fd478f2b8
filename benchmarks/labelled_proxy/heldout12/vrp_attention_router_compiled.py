"""Last-mile route construction with an attention model (Kool et al., CVRP).

Each depot's morning batch of stops is encoded once; the decoder then picks
the next stop for every van in the batch, one step at a time, until all
stops are served. The per-step decoder is compiled with reduce-overhead and
kept on the planner object.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("routing")
D, HEADS, N_MAX = 128, 8, 120


class Encoder(nn.Module):
    def __init__(self, layers=3):
        super().__init__()
        self.node, self.depot = nn.Linear(3, D), nn.Linear(2, D)
        self.attn = nn.ModuleList(nn.MultiheadAttention(D, HEADS, batch_first=True) for _ in range(layers))
        self.ff = nn.ModuleList(nn.Sequential(nn.Linear(D, 512), nn.ReLU(), nn.Linear(512, D)) for _ in range(layers))

    def forward(self, depot, locs, demand):
        h = torch.cat([self.depot(depot)[:, None], self.node(torch.cat([locs, demand[:, 1:, None]], -1))], 1)
        for attn, ff in zip(self.attn, self.ff):
            h = h + attn(h, h, h, need_weights=False)[0]
            h = h + ff(h)
        return h, h.mean(1)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(2 * D + 1, D)
        self.k = nn.Linear(D, D)

    def forward(self, node_emb, graph_emb, last, cap_left):
        last_emb = node_emb.gather(1, last[:, None, None].expand(-1, 1, D)).squeeze(1)
        q = self.q(torch.cat([graph_emb, last_emb, cap_left[:, None]], -1))
        return 10.0 * torch.tanh(torch.einsum("bd,bnd->bn", q, self.k(node_emb)) / D ** 0.5)


class RoutePlanner:
    def __init__(self, encoder, decoder):
        self.encoder, self.decoder = encoder.cuda().eval(), decoder.cuda().eval()
        self.step = torch.compile(self._step, mode="reduce-overhead")
        self.tightest = 1.0

    def _step(self, node_emb, graph_emb, last, cap_left, visited, demand):
        logits = self.decoder(node_emb, graph_emb, last, cap_left)
        blocked = visited | (demand > cap_left[:, None])
        blocked[:, 0] = last == 0
        logits = logits.masked_fill(blocked, float("-inf"))  # CLEAN: masked_fill, fixed shape
        log.debug("decode step for %d vans", logits.shape[0])  # HAZARD: host-code
        self.tightest = cap_left.min().item()  # HAZARD: host-sync
        return logits.argmax(-1)

    @torch.no_grad()
    def solve(self, depot, locs, demand):
        node_emb, graph_emb = self.encoder(depot, locs, demand)
        B, N = demand.shape
        visited = torch.zeros(B, N, dtype=torch.bool, device="cuda")
        visited |= demand == 0
        visited[:, 0] = False
        last = torch.zeros(B, dtype=torch.long, device="cuda")
        cap = torch.ones(B, device="cuda")
        tours = []
        for _ in range(2 * N):
            sel = self.step(node_emb, graph_emb, last, cap, visited, demand)
            tours.append(sel)  # HAZARD: static-address
            cap = torch.where(sel == 0, torch.ones_like(cap), cap - demand.gather(1, sel[:, None]).squeeze(1))
            visited = visited.scatter(1, sel[:, None], True)
            last = sel.clone()  # CLEAN: cloned before it is fed back into the compiled step
            if bool(visited[:, 1:].all()):
                break
        return tours


def pad_instance(depot, locs, demand, n_max=N_MAX):
    extra = n_max - demand.shape[1]
    return depot, F.pad(locs, (0, 0, 0, extra)), F.pad(demand, (0, extra))


if __name__ == "__main__":
    planner = RoutePlanner(Encoder(), Decoder())
    for day in range(30):
        n_stops = int(torch.randint(60, N_MAX, ()))
        depot = torch.rand(64, 2, device="cuda")
        locs = torch.rand(64, n_stops, 2, device="cuda")
        demand = torch.cat([torch.zeros(64, 1, device="cuda"), torch.rand(64, n_stops, device="cuda") * 0.1], 1)
        routes = planner.solve(depot, locs, demand)  # HAZARD: dynamic-shape
        padded = planner.solve(*pad_instance(depot, locs, demand, N_MAX + 1))  # CLEAN: padded to one fixed size
        print(day, n_stops, torch.stack(routes)[:, 0].tolist()[:12], len(padded))
