"""BLINK-style bi-encoder entity linking service: a mention encoder plus dot-product retrieval over a GPU
entity index, captured once per (batch, seq_len) bucket in one shared pool."""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("el")

class SelfAttentionBlock(nn.Module):
    def __init__(self, dim, heads=8):
        super().__init__()
        self.heads, self.qkv, self.out = heads, nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, mask):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, -1).unbind(2)
        att = torch.einsum("bqhd,bkhd->bhqk", q, k) / (d // self.heads) ** 0.5
        att = att.masked_fill(~mask[:, None, None, :], float("-inf")).softmax(-1)
        x = x + self.out(torch.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, s, d))
        return x + self.ffn(self.norm2(x))

class MentionEncoder(nn.Module):
    def __init__(self, vocab=30522, dim=256, layers=4):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(512, dim)
        self.blocks = nn.ModuleList([SelfAttentionBlock(dim) for _ in range(layers)])

    def forward(self, ids, mask):
        x = self.tok(ids) + self.pos.weight[: ids.shape[1]]
        for blk in self.blocks:
            x = blk(x, mask)
        return F.normalize(x[:, 0], dim=-1)

class EntityLinker:
    def __init__(self, encoder, entity_index, entity_types, buckets=((8, 64), (32, 64), (32, 128))):
        self.encoder = encoder.cuda().eval()
        self.index, self.entity_types = entity_index, entity_types
        self.allowed_types = [1, 4, 7]  # PER, ORG, LOC for the news tenant
        self.buckets = sorted(buckets, reverse=True)
        self.pool, self.graphs = torch.cuda.graph_pool_handle(), {}

    def _link(self, ids, mask):
        q = self.encoder(ids, mask)
        torch.cuda.empty_cache()  # HAZARD: memory
        log.debug("scoring mentions against the entity index")  # CLEAN: plain-string log, no tensor formatted
        scores = q @ self.index.t()
        allowed = torch.tensor(self.allowed_types, device="cuda")  # HAZARD: host-sync
        ok = (self.entity_types[:, None] == allowed).any(-1)
        scores = scores.masked_fill(~ok, float("-inf"))  # CLEAN: masked_fill keeps the shape
        return scores.topk(10, dim=-1)  # CLEAN: fixed-k topk is capturable

    @torch.no_grad()
    def capture(self):
        for bs, seq in self.buckets:
            ids = torch.zeros(bs, seq, dtype=torch.long, device="cuda")
            mask = torch.ones(bs, seq, dtype=torch.bool, device="cuda")
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    self._link(ids, mask)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool, stream=torch.cuda.current_stream()):  # HAZARD: stream
                out = self._link(ids, mask)
            self.graphs[(bs, seq)] = (g, ids, mask, out)

    def reload_index(self, path):
        self.index = torch.load(path, map_location="cuda")  # HAZARD: static-address

    @torch.no_grad()
    def __call__(self, ids, mask):
        n, s = ids.shape
        key = min((k for k in self.graphs if k[0] >= n and k[1] >= s), key=lambda k: k[0] * k[1])
        g, s_ids, s_mask, (vals, idx) = self.graphs[key]
        s_ids.zero_()
        s_mask.zero_()
        s_mask[:, 0] = True
        s_ids[:n, :s].copy_(ids)  # CLEAN: copy_ into the captured inputs
        s_mask[:n, :s].copy_(mask)
        g.replay()
        return vals[:n].cpu(), idx[:n].cpu()

if __name__ == "__main__":
    index = F.normalize(torch.randn(200_000, 256, device="cuda"), dim=-1)
    types = torch.randint(0, 10, (200_000,), device="cuda")
    linker = EntityLinker(MentionEncoder(), index, types)
    linker.capture()
    for step in range(50):
        ids = torch.randint(0, 30522, (5, 40), device="cuda")
        scores, entity_ids = linker(ids, torch.ones_like(ids, dtype=torch.bool))
        if step == 25:
            linker.reload_index("entity_index_v2.pt")
