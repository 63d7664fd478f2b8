"""Query tower of an e-commerce product search engine.

Queries are hashed into character trigrams, embedded by a small CNN and scored
against the catalogue embedding matrix (a registered buffer refreshed nightly from
the item tower). Serving is compiled with the Dynamo "cudagraphs" backend.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

N_HASH, DIM, MAX_TOK, SERVE_BATCH = 200_003, 256, 48, 64


def trigram_ids(queries):
    out = []
    for q in queries:
        q = f"#{q.lower().strip()}#"
        out.append([1 + hash(q[i:i + 3]) % (N_HASH - 1) for i in range(len(q) - 2)])
    return out


class QueryTower(nn.Module):
    def __init__(self, n_items, sku_ids):
        super().__init__()
        self.emb = nn.Embedding(N_HASH, 128, padding_idx=0)
        self.conv = nn.Conv1d(128, DIM, 3, padding=1)
        self.proj = nn.Linear(DIM, DIM)
        self.register_buffer("catalog", torch.zeros(n_items, DIM))
        self.register_buffer("in_stock", torch.ones(n_items, dtype=torch.bool))
        self.sku_ids = sku_ids
        self.min_score = 0.25

    def encode(self, tok):
        h = self.conv(self.emb(tok).transpose(1, 2)).amax(-1)
        return F.normalize(self.proj(h), dim=-1)

    def forward(self, tok, k=50):
        scores = self.encode(tok) @ self.catalog.T
        scores = scores.masked_fill(~self.in_stock, float("-inf"))  # CLEAN: masked_fill keeps shapes static
        top, idx = scores.topk(k, dim=-1)
        if (top[:, 0] < self.min_score).all():  # HAZARD: dynamic-control-flow
            return top, torch.full_like(idx, -1)
        return top, idx


@torch.compile(backend="cudagraphs")
def search(model, tok):
    top, idx = model(tok)
    rows = idx.tolist()  # HAZARD: host-sync
    return top, [[model.sku_ids[i] for i in r if i >= 0] for r in rows]


@torch.compile(backend="cudagraphs")
def search_rows(model, tok):
    return model(tok)


def to_tokens(queries, width=None, batch=None):
    ids = trigram_ids(queries)
    width = width or max(len(t) for t in ids)
    tok = torch.zeros(batch or len(ids), width, dtype=torch.long)
    for i, t in enumerate(ids):
        t = t[:width]
        tok[i, :len(t)] = torch.tensor(t)
    return tok.pin_memory().cuda(non_blocking=True)


@torch.no_grad()
def serve(model, queries):
    return search(model, to_tokens(queries))  # HAZARD: dynamic-shape


@torch.no_grad()
def serve_padded(model, queries):
    top, idx = search_rows(model, to_tokens(queries, MAX_TOK, SERVE_BATCH))  # CLEAN: padded to one fixed shape
    rows = idx[:len(queries)].tolist()  # CLEAN: host read after the compiled call returned
    return top[:len(queries)].clone(), [[model.sku_ids[i] for i in r if i >= 0] for r in rows]


def nightly_refresh(model, item_tower_out, stock_flags):
    model.catalog = F.normalize(item_tower_out, dim=-1).cuda()  # HAZARD: static-address
    model.in_stock.copy_(stock_flags)  # CLEAN: in-place refresh keeps the buffer address


if __name__ == "__main__":
    n_items = 500_000
    model = QueryTower(n_items, [f"SKU{i:07d}" for i in range(n_items)]).cuda().eval()
    nightly_refresh(model, torch.randn(n_items, DIM), torch.rand(n_items) > 0.05)
    for batch in (["usb c cable", "running shoes women"], ["4k monitor 27 inch"] * 5):
        print(serve(model, batch)[1][0][:5])
        print(serve_padded(model, batch)[1][0][:5])
