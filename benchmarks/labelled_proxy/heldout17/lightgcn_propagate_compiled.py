"""LightGCN collaborative filtering for a streaming-video catalogue.

Embedding propagation over the normalised user-item bipartite graph is written with
index_add_ on fixed edge lists. BPR loss, optimizer step and top-K retrieval are compiled
with options={"triton.cudagraphs": True} from one module-level dict.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("lightgcn")
CG = {"triton.cudagraphs": True}


class LightGCN(nn.Module):
    def __init__(self, n_users, n_items, dim, src, dst, edge_w, n_layers=3):
        super().__init__()
        self.n_users, self.n_items, self.n_layers = n_users, n_items, n_layers
        self.user_emb = nn.Embedding(n_users, dim)
        self.item_emb = nn.Embedding(n_items, dim)
        nn.init.normal_(self.user_emb.weight, std=0.1)
        nn.init.normal_(self.item_emb.weight, std=0.1)
        self.register_buffer("src", src)
        self.register_buffer("dst", dst)
        self.register_buffer("w", edge_w)

    def propagate(self):
        e = torch.cat([self.user_emb.weight, self.item_emb.weight])
        out = e / (self.n_layers + 1)
        for _ in range(self.n_layers):
            e = torch.zeros_like(e).index_add_(0, self.dst, e[self.src] * self.w.unsqueeze(1))  # CLEAN: index_add_ with CUDA edge indices
            out = out + e / (self.n_layers + 1)
        return out.split([self.n_users, self.n_items])


class Recommender:
    def __init__(self, model, lr=1e-3, reg=1e-4):
        self.model = model.cuda()
        self.reg = reg
        self.opt = torch.optim.Adam(self.model.parameters(), lr=lr, weight_decay=1e-4)
        self.loss_fn = torch.compile(self._bpr_loss, options=CG)
        self.step_fn = torch.compile(self.opt.step, options=CG)
        self.topk_fn = torch.compile(self._topk, options=CG)

    def _bpr_loss(self, users, pos, neg):
        u_all, i_all = self.model.propagate()
        u, p, n = u_all[users], i_all[pos], i_all[neg]
        bpr = -F.logsigmoid((u * p).sum(-1) - (u * n).sum(-1)).mean()
        ego = self.model.user_emb(users).pow(2).sum() + self.model.item_emb(pos).pow(2).sum()
        return bpr + self.reg * ego / users.shape[0]

    def _topk(self, users, seen_mask, k=20):
        u_all, i_all = self.model.propagate()
        scores = (u_all[users] @ i_all.t()).masked_fill(seen_mask, -1e9)  # CLEAN: masked_fill keeps the shape
        log.info("scored batch, best score %s", scores.max())  # HAZARD: host-code
        return torch.topk(scores, k).indices

    def train_epoch(self, loader, epoch):
        if epoch == 10:
            self.opt.param_groups[0]["weight_decay"] = 0.0  # HAZARD: optimizer
        total = 0.0
        for users, pos, neg in loader:  # fixed 8192-triple BPR batches (drop_last=True)
            self.opt.zero_grad(set_to_none=True)
            loss = self.loss_fn(users, pos, neg)
            total += loss.item()  # CLEAN: read before backward and before the compiled step
            loss.backward()
            self.step_fn()
        return total

    @torch.no_grad()
    def recommend(self, users, seen_mask):  # users of one API request, 1..500 ids
        return self.topk_fn(users, seen_mask).clone()  # HAZARD: dynamic-shape

    @torch.no_grad()
    def decay_edges(self, factor=0.98):
        self.model.w.mul_(factor)  # CLEAN: in-place update keeps the buffer address

    @torch.no_grad()
    def reweight_edges(self, recency_days):
        w = torch.exp(-recency_days / 30.0)
        deg = torch.zeros(self.model.n_users + self.model.n_items, device="cuda").index_add_(0, self.model.dst, w)
        self.model.w = w / deg[self.model.dst].clamp_min(1e-6)  # HAZARD: static-address
