"""Sparse + dense feature tower for a recommender; per-table pooling functions are compiled and
kept in a dict keyed by feature name."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CG_OPTS = {"triton.cudagraphs": True}


class SparseTower(nn.Module):
    def __init__(self, tables, dim=64, dense_in=13):
        super().__init__()
        self.tables = nn.ModuleDict({name: nn.EmbeddingBag(rows, dim, mode="sum") for name, rows in tables.items()})
        self.rows = dict(tables)
        self.dense = nn.Sequential(nn.Linear(dense_in, 256), nn.ReLU(), nn.Linear(256, dim))
        self.pool_fns = {name: torch.compile(self._make_pool(name), options=CG_OPTS) for name in tables}
        self.dense_fn = torch.compile(self._dense_tower, options=CG_OPTS)

    def _make_pool(self, name):
        table = self.tables[name]
        num_rows = self.rows[name]

        def pool(ids, offsets):
            hashed = torch.remainder(ids, num_rows)  # CLEAN: hashing stays elementwise on the device
            if ids.max() >= num_rows:  # HAZARD: dynamic-control-flow
                ids = hashed
            return table(ids, offsets)

        return pool

    def _dense_tower(self, dense):
        dense.clamp_(min=0.0)  # HAZARD: static-address
        return self.dense(torch.log1p(dense))  # CLEAN: out-of-place transform of the input

    def dedup_pool(self, name, ids, offsets):
        uniq, inverse = torch.unique(ids, return_inverse=True)  # CLEAN: runs eagerly, outside the compiled functions
        return self.pool_fns[name](uniq[inverse], offsets)

    def forward(self, dense, sparse):
        pooled = [self.pool_fns[name](ids, offsets) for name, (ids, offsets) in sparse.items()]
        return torch.cat([self.dense_fn(dense)] + pooled, dim=-1)


class Interaction(nn.Module):
    def forward(self, feats, n_feats):
        z = feats.view(feats.shape[0], n_feats, -1)
        inter = torch.bmm(z, z.transpose(1, 2))
        iu = torch.triu_indices(n_feats, n_feats, 1, device=feats.device)
        return inter[:, iu[0], iu[1]]


@torch.compile(options={"triton.cudagraphs": True})
def top_items(scores, seen_mask, k: int = 50):
    scores = scores.masked_fill(seen_mask, float("-inf"))
    active = scores[scores > 0]  # HAZARD: dynamic-shape
    return scores.topk(k, dim=-1), active.numel()


def score_batch(tower, inter, head, dense, sparse, seen_mask):
    feats = tower(dense.cuda(), {k: (i.cuda(), o.cuda()) for k, (i, o) in sparse.items()})
    logits = head(inter(feats, len(sparse) + 1)).squeeze(-1)
    (vals, idx), n_active = top_items(torch.sigmoid(logits)[None].expand(seen_mask.shape[0], -1), seen_mask)
    return vals.cpu(), idx.cpu(), F.relu(vals).mean().item()
