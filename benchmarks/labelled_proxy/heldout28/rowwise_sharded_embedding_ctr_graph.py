"""Row-wise sharded embedding tables for a CTR ranking service (TorchRec-like, written by
hand): ids are all-gathered, every rank looks up the rows it owns and a reduce-scatter
hands each rank the rows of its own requests. One graph per batch bucket."""
import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class RowwiseShardedEmbedding(nn.Module):
    def __init__(self, rows, dim, hot_ids, dedup=True):
        super().__init__()
        self.world, self.rank = dist.get_world_size(), dist.get_rank()
        self.rpr = (rows + self.world - 1) // self.world
        self.weight = nn.Parameter(torch.randn(self.rpr, dim) * 0.01)
        self.hot_ids = hot_ids  # list of ids served from the replicated hot cache
        self.hot_cache = nn.Parameter(torch.randn(len(hot_ids), dim) * 0.01)
        self.dedup = dedup

    def forward(self, ids):
        b, f = ids.shape
        flat = ids.flatten()
        if self.dedup:
            flat, inverse = torch.unique(flat, return_inverse=True)  # HAZARD: dynamic-shape
        everyone = flat.new_empty(self.world * flat.numel())
        dist.all_gather_into_tensor(everyone, flat)
        mine = (everyone // self.rpr) == self.rank
        loc = (everyone - self.rank * self.rpr).clamp(0, self.rpr - 1)
        rows = F.embedding(loc, self.weight) * mine[:, None]  # CLEAN: masked multiply keeps a fixed shape
        out = rows.new_empty(flat.numel(), rows.shape[1])
        dist.reduce_scatter_tensor(out, rows)
        hot = torch.tensor(self.hot_ids, device=ids.device)  # HAZARD: host-sync
        hit = (flat[:, None] == hot[None, :])
        out = torch.where(hit.any(1, keepdim=True), hit.float() @ self.hot_cache, out)  # CLEAN: torch.where select
        if self.dedup:
            out = out[inverse]
        return out.view(b, f, -1)


class DenseNormalizer(nn.Module):
    def __init__(self, stats_path):
        super().__init__()
        st = np.load(stats_path)
        self.mu_np = st["mean"]
        self.register_buffer("inv_sd", torch.from_numpy(1.0 / st["std"]).float())

    def forward(self, dense):
        mu = torch.from_numpy(self.mu_np).cuda()  # HAZARD: pinned-memory
        return (dense - mu) * self.inv_sd  # CLEAN: buffer uploaded once with the module, no copy in the region


class CTRServer:
    def __init__(self, emb, norm, mlp, buckets=(256, 1024, 4096), n_sparse=26, n_dense=13):
        self.emb, self.norm, self.mlp = emb, norm, mlp
        self.pool = torch.cuda.graph_pool_handle()
        self.ids, self.dense, self.out, self.graphs = {}, {}, {}, {}
        for b in sorted(buckets, reverse=True):
            self.ids[b] = torch.zeros(b, n_sparse, dtype=torch.long, device="cuda")
            self.dense[b] = torch.zeros(b, n_dense, device="cuda")
            self._capture(b)

    def _fwd(self, b):
        e = self.emb(self.ids[b]).flatten(1)
        return torch.sigmoid(self.mlp(torch.cat([e, self.norm(self.dense[b])], 1))).squeeze(1)

    @torch.no_grad()
    def _capture(self, b):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._fwd(b)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool):
            self.out[b] = self._fwd(b)
        self.graphs[b] = g

    def score(self, requests):
        results = []
        for ids, dense in requests:
            b = next(k for k in sorted(self.graphs) if k >= ids.shape[0])
            self.ids[b].zero_()
            self.ids[b][: ids.shape[0]].copy_(ids)  # CLEAN: in-place fill of the static ids
            self.dense[b][: dense.shape[0]].copy_(dense)
            self.graphs[b].replay()
            results.append(self.out[b])  # HAZARD: static-address
        return results
