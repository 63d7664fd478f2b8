"""DLRM-style CTR model (EmbeddingBag tables + bottom/top MLPs + dot interaction).

Online scoring uses torch.compile(mode="reduce-overhead"); offline AUC uses default inductor.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

N_TABLES, DIM, MAX_IDS, BUCKET = 8, 64, 32, 1024


class DLRM(nn.Module):
    def __init__(self, n_dense=13, rows=100_000, hot_rows=20_000):
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(n_dense, 256), nn.ReLU(), nn.Linear(256, DIM), nn.ReLU())
        self.tables = nn.ModuleList(nn.EmbeddingBag(rows, DIM, mode="sum", padding_idx=0) for _ in range(N_TABLES))
        n_f = N_TABLES + 1
        self.top = nn.Sequential(nn.Linear(DIM + n_f * (n_f - 1) // 2, 512), nn.ReLU(), nn.Linear(512, 1))
        self.register_buffer("tri", torch.tril_indices(n_f, n_f, offset=-1), persistent=False)
        self.hot_rows = hot_rows
        self.cold_lookups = 0

    def interact(self, dense, sparse):
        z = torch.stack([dense] + sparse, dim=1)
        zz = torch.bmm(z, z.transpose(1, 2))
        return torch.cat([dense, zz[:, self.tri[0], self.tri[1]]], dim=1)  # CLEAN: indexing with a registered index buffer

    def forward(self, dense, indices):  # indices: (N_TABLES, B, MAX_IDS), 0 = padding
        self.cold_lookups += (indices >= self.hot_rows).sum().item()  # HAZARD: host-sync
        sparse = [tab(indices[t]) for t, tab in enumerate(self.tables)]
        x = self.interact(self.bottom(torch.log1p(dense)), sparse)
        logits = self.top(x).squeeze(-1)
        print("mean predicted ctr", logits.sigmoid().mean())  # HAZARD: host-code
        return logits


model = DLRM().cuda().eval()
serve = torch.compile(model, mode="reduce-overhead")
offline = torch.compile(model)


@torch.no_grad()
def score_requests(requests):
    all_scores = []
    for dense, ids in requests:  # batch size follows the request, 1..BUCKET candidates
        scores = serve(dense, ids)  # HAZARD: dynamic-shape
        all_scores.append(scores)  # HAZARD: static-address
    return torch.cat(all_scores)


@torch.no_grad()
def score_bucketed(requests):
    kept = []
    for dense, ids in requests:
        n = dense.shape[0]
        dense_p = F.pad(dense, (0, 0, 0, BUCKET - n))
        ids_p = F.pad(ids, (0, 0, 0, BUCKET - n))
        scores = serve(dense_p, ids_p)  # CLEAN: every request padded to the same bucket
        kept.append(scores[:n].clone())  # CLEAN: output cloned before the next replay
    return torch.cat(kept)


@torch.no_grad()
def offline_auc(batches):
    preds, labels = [], []
    for dense, ids, y in batches:
        p = offline(dense, ids)  # CLEAN: ragged batches under default torch.compile, no CUDA graphs
        preds.append(p.sigmoid())
        labels.append(y.float())
    p, y = torch.cat(preds), torch.cat(labels)
    order = p.argsort(descending=True)
    y = y[order]
    tp, fp = y.cumsum(0), (1 - y).cumsum(0)
    return torch.trapz(tp / tp[-1], fp / fp[-1]).item()


def refresh_hot_rows(counts):
    # promote the most frequent ids of the last hour to the HBM-resident range
    k = model.hot_rows
    return counts.topk(k).indices


if __name__ == "__main__":
    reqs = [(torch.rand(n, 13, device="cuda"),
             torch.randint(0, 100_000, (N_TABLES, n, MAX_IDS), device="cuda")) for n in (17, 250, 1024, 3)]
    print(score_requests(reqs).shape, score_bucketed(reqs).shape)
