"""GraphSAGE link prediction for a who-to-follow recommender.

Neighbour sampling uses a fixed fan-out so node encoding has static shapes. Both
the encoder and the edge scorer are compiled with mode="reduce-overhead"; the
scorer is built from a lambda over the scoring config.
"""
import time
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class ScoreConfig:
    temperature: float = 1.0
    fanout: int = 10


class SAGELayer(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.self_lin, self.nbr_lin = nn.Linear(d_in, d_out), nn.Linear(d_in, d_out)

    def forward(self, h, nbr_idx):
        agg = h[nbr_idx].mean(1)  # CLEAN: gather with a device index tensor of fixed fan-out
        return F.relu(self.self_lin(h) + self.nbr_lin(agg))


class SAGEEncoder(nn.Module):
    def __init__(self, d_in=128, d=256):
        super().__init__()
        self.l1, self.l2 = SAGELayer(d_in, d), SAGELayer(d, d)
        self.last_encode_t = 0.0

    def forward(self, x, nbr1, nbr2):
        self.last_encode_t = time.perf_counter()  # HAZARD: host-code
        return self.l2(self.l1(x, nbr1), nbr2)


def edge_scores(h, src, dst, cfg):
    dst.clamp_(0, h.shape[0] - 1)  # HAZARD: static-address
    hn = F.normalize(h, dim=-1)
    s = (hn[src] * hn[dst]).sum(-1)
    return s / cfg.temperature  # HAZARD: python-scalar


class LinkPredictor:
    def __init__(self, encoder, n_nodes, max_edges=65536):
        self.cfg = ScoreConfig()
        self.encoder = torch.compile(encoder.cuda(), mode="reduce-overhead")
        self.score = torch.compile(lambda h, s, d: edge_scores(h, s, d, self.cfg), mode="reduce-overhead")
        self.n_nodes, self.max_edges = n_nodes, max_edges
        self.opt = torch.optim.Adam(encoder.parameters(), lr=1e-3)

    def _pad(self, idx):
        return F.pad(idx, (0, self.max_edges - idx.shape[0]))

    def train_step(self, x, nbr1, nbr2, pos_src, pos_dst, epoch):
        self.cfg.temperature = max(0.05, 0.5 * 0.9 ** epoch)
        h = self.encoder(x, nbr1, nbr2)
        neg_src = torch.randint(0, self.n_nodes, (self.max_edges,), device=x.device)  # CLEAN: eager device RNG outside the compiled scorer
        neg_dst = torch.randint(0, self.n_nodes, (self.max_edges,), device=x.device)
        pos = self.score(h, pos_src, pos_dst)  # HAZARD: dynamic-shape
        neg = self.score(h, neg_src, neg_dst)  # CLEAN: fixed number of sampled negatives, one graph
        loss = F.softplus(-pos).mean() + F.softplus(neg).mean()
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return loss.detach().clone()

    @torch.no_grad()
    def recommend(self, x, nbr1, nbr2, src, cand):
        h = self.encoder(x, nbr1, nbr2)
        n = src.shape[0]
        scores = self.score(h, self._pad(src), self._pad(cand))  # CLEAN: edge lists padded to max_edges
        return scores[:n].clone()
