"""Exa.TrkX-style charged-particle tracking: an interaction GNN scores candidate edges
between silicon hits, pruned edges are grouped into track candidates by label
propagation (eager). The GNN stages are compiled with the Dynamo "cudagraphs" backend.
"""
import torch
import torch.nn as nn

MAX_HITS, MAX_EDGES = 120_000, 600_000
N_PROP = 12                                           # label-propagation sweeps


def mlp(i, o, h=128):
    return nn.Sequential(nn.Linear(i, h), nn.LayerNorm(h), nn.ReLU(), nn.Linear(h, o))


class InteractionGNN(nn.Module):
    def __init__(self, d_hit=3, d=128, n_iter=6):
        super().__init__()
        self.enc_node, self.enc_edge = mlp(d_hit, d), mlp(2 * d_hit, d)
        self.edge_nets = nn.ModuleList([mlp(3 * d, d) for _ in range(n_iter)])
        self.node_nets = nn.ModuleList([mlp(2 * d, d) for _ in range(n_iter)])
        self.out = mlp(3 * d, 1)

    def forward(self, x, edge_index):
        src, dst = edge_index
        h, e = self.enc_node(x), self.enc_edge(torch.cat([x[src], x[dst]], -1))
        for en, nn_ in zip(self.edge_nets, self.node_nets):
            e = e + en(torch.cat([h[src], h[dst], e], -1))
            agg = torch.zeros_like(h).index_add_(0, dst, e)
            h = h + nn_(torch.cat([h, agg], -1))
        return self.out(torch.cat([h[src], h[dst], e], -1)).squeeze(-1)


@torch.compile(backend="cudagraphs")
def normalize_hits(hits, mean, std):
    hits.sub_(mean).div_(std)  # HAZARD: static-address
    return hits


@torch.compile(backend="cudagraphs")
def score_and_prune(model, x, edge_index):
    scores = torch.sigmoid(model(x, edge_index))
    keep_frac = float((scores > 0.5).float().mean())  # HAZARD: host-sync
    kept = edge_index[:, scores > 0.5]  # HAZARD: dynamic-shape
    return scores, kept, keep_frac


def build_tracks(kept, n_hits):
    labels = torch.arange(n_hits, device=kept.device)
    src, dst = kept
    for _ in range(N_PROP):
        labels = labels.scatter_reduce(0, dst, labels[src], reduce="amin")
        labels = labels.scatter_reduce(0, src, labels[dst], reduce="amin")
    sizes = torch.zeros(int(labels.max()) + 1, device=kept.device)  # CLEAN: eager label propagation, not compiled
    sizes.scatter_add_(0, labels, torch.ones_like(labels, dtype=sizes.dtype))
    return labels, sizes


@torch.compile(backend="cudagraphs")
def score_padded(model, x_pad, edges_pad, edge_valid, mean, std):
    x = (x_pad - mean) / std  # CLEAN: out-of-place normalisation, input untouched
    scores = torch.sigmoid(model(x, edges_pad))
    return torch.where(edge_valid, scores, torch.zeros_like(scores))  # CLEAN: padding masked with where, fixed shape


@torch.no_grad()
def reconstruct(model, events, mean, std):
    model = model.eval().cuda()
    results = []
    for ev in events:                                    # each event has its own number of hits and edges
        x = normalize_hits(ev["hits"].cuda(), mean, std)
        scores, kept, keep_frac = score_and_prune(model, x, ev["edges"].cuda())  # HAZARD: dynamic-shape
        labels, sizes = build_tracks(kept, x.shape[0])
        results.append((labels, sizes, keep_frac))
    return results


@torch.no_grad()
def edge_efficiency(model, events, mean, std):
    model = model.eval().cuda()
    x_pad = torch.zeros(MAX_HITS, 3, device="cuda")
    e_pad = torch.zeros(2, MAX_EDGES, dtype=torch.long, device="cuda")
    valid = torch.zeros(MAX_EDGES, dtype=torch.bool, device="cuda")
    eff = []
    for ev in events:
        n, m = ev["hits"].shape[0], ev["edges"].shape[1]
        x_pad.zero_()[:n].copy_(ev["hits"])
        e_pad.zero_()[:, :m].copy_(ev["edges"])
        valid.zero_()[:m] = True
        scores = score_padded(model, x_pad, e_pad, valid, mean, std)  # CLEAN: fixed padded shapes
        truth = ev["truth"].cuda()
        eff.append(((scores[:m] > 0.5) & truth).sum() / truth.sum())
    return torch.stack(eff).mean().item()
