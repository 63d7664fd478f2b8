"""Two-tower candidate retrieval server: query tower + dot-product scoring + top-k in one graph.

Requests are padded to a fixed batch of 64 user rows.  The item tower runs offline;
its normalized embeddings are pushed to the server every few minutes.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class QueryTower(nn.Module):
    def __init__(self, n_ids=2_000_000, dim=128, hist_len=50):
        super().__init__()
        self.emb = nn.Embedding(n_ids, dim, padding_idx=0)
        self.mlp = nn.Sequential(nn.Linear(dim, 256), nn.GELU(), nn.Linear(256, dim))
        self.hist_len = hist_len

    def forward(self, hist_ids):
        e = self.emb(hist_ids)
        valid = (hist_ids != 0).float().unsqueeze(-1)
        pooled = (e * valid).sum(1) / valid.sum(1).clamp_min(1.0)
        return F.normalize(self.mlp(pooled), dim=-1)


class RetrievalServer:
    def __init__(self, tower: QueryTower, item_emb, item_ts, k=200, batch=64, tau=3 * 86400.0):
        self.tower = tower.eval().cuda()
        self.item_emb = F.normalize(item_emb.cuda(), dim=-1)
        self.item_ts = item_ts.cuda()
        self.oos_mask = torch.zeros(item_emb.shape[0], dtype=torch.bool, device="cuda")
        self.blocked_items = []
        self.k, self.batch, self.tau = k, batch, tau
        self.ids = torch.zeros(batch, tower.hist_len, dtype=torch.long, device="cuda")
        self.stream = torch.cuda.Stream()
        self.graph = torch.cuda.CUDAGraph()
        self.top = None

    def _retrieve(self, ids):
        scores = self.tower(ids) @ self.item_emb.t()
        age = time.time() - self.item_ts  # HAZARD: host-code
        scores = scores * torch.exp(-age.clamp_min(0.0) / self.tau)
        scores[:, self.blocked_items] = float("-inf")  # HAZARD: host-sync
        scores = scores.masked_fill(self.oos_mask, float("-inf"))  # CLEAN: device-side mask, refreshed in place
        return torch.topk(scores, self.k, dim=-1)  # CLEAN: k is fixed when the server is built

    def _capture(self):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.no_grad(), torch.cuda.stream(self.stream):
            for _ in range(3):
                self._retrieve(self.ids)
        torch.cuda.current_stream().wait_stream(self.stream)
        with torch.no_grad(), torch.cuda.graph(self.graph, stream=self.stream):  # HAZARD: api-misuse
            self.top = self._retrieve(self.ids)

    def start(self):
        self._capture()

    def set_blocklist(self, item_ids):
        self.blocked_items = sorted(set(item_ids))
        self._capture()

    def refresh_items(self, new_emb, new_ts, out_of_stock):
        self.item_emb = F.normalize(new_emb.cuda(), dim=-1)  # HAZARD: static-address
        self.item_ts.copy_(new_ts)  # CLEAN: in-place refresh keeps the captured address
        self.oos_mask.copy_(out_of_stock)

    def serve(self, hist_ids):
        n = hist_ids.shape[0]
        self.ids.zero_()
        self.ids[:n].copy_(hist_ids, non_blocking=True)
        self.graph.replay()
        vals, idx = self.top
        return idx[:n].cpu().tolist(), vals[:n].cpu().tolist()
