"""ColBERT-style late-interaction re-ranker for a first-stage BM25 candidate list.

Queries are padded with [MASK] tokens (query augmentation), documents are encoded per
candidate, and the MaxSim score is reduced on the GPU. One graph per candidate-count bucket.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyBertEncoder(nn.Module):
    def __init__(self, vocab=30522, dim=256, out_dim=128, layers=4, heads=4, max_len=512):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.qkv = nn.ModuleList(nn.Linear(dim, 3 * dim) for _ in range(layers))
        self.ffn = nn.ModuleList(nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
                                 for _ in range(layers))
        self.norms = nn.ModuleList(nn.LayerNorm(dim) for _ in range(2 * layers))
        self.proj = nn.Linear(dim, out_dim, bias=False)
        self.heads = heads

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        h = self.tok(ids) + self.pos(pos)
        for i, (qkv, ffn) in enumerate(zip(self.qkv, self.ffn)):
            q, k, v = qkv(self.norms[2 * i](h)).chunk(3, -1)
            split = lambda t: t.view(t.shape[0], t.shape[1], self.heads, -1).transpose(1, 2)
            a = F.scaled_dot_product_attention(split(q), split(k), split(v))
            h = h + a.transpose(1, 2).flatten(2)
            h = h + ffn(self.norms[2 * i + 1](h))
        return self.proj(h)


class LateInteractionReranker:
    BUCKETS = (32, 64, 128)

    def __init__(self, encoder, q_len=24, d_len=180, mask_id=103, n_aug=8):
        self.enc = encoder.eval().cuda()
        self.expansion_ids = [mask_id] * n_aug
        self.min_score = 8.0
        self.q_len, self.d_len = q_len, d_len
        self.pool = torch.cuda.graph_pool_handle()
        self.side, self.log_stream = torch.cuda.Stream(), torch.cuda.Stream()
        self.score_log = torch.zeros(max(self.BUCKETS), pin_memory=True)
        self.bufs, self.graphs, self.outs = {}, {}, {}

    def _maxsim(self, q_ids, d_ids, d_mask):
        aug = torch.tensor(self.expansion_ids, device="cuda")  # HAZARD: host-sync
        q = F.normalize(self.enc(torch.cat([q_ids, aug[None]], 1)), dim=-1)[0]
        d = F.normalize(self.enc(d_ids), dim=-1)
        sim = torch.einsum("qd,nld->nql", q, d)
        sim = sim.masked_fill(~d_mask[:, None, :], -1e4)  # CLEAN: masked_fill keeps the shape fixed
        scores = sim.max(-1).values.sum(-1)
        with torch.cuda.stream(self.log_stream):  # HAZARD: stream
            self.score_log[: scores.shape[0]].copy_(scores, non_blocking=True)
        top = torch.topk(scores, k=10)  # CLEAN: fixed-k topk
        confident_mean = scores[scores > self.min_score].mean()  # HAZARD: dynamic-shape
        return top.values, top.indices, confident_mean

    @torch.no_grad()
    @torch.autocast("cuda", dtype=torch.float16)  # HAZARD: autocast-cache
    def _capture_bucket(self, n):
        buf = {"q": torch.zeros(1, self.q_len, dtype=torch.long, device="cuda"),
               "d": torch.zeros(n, self.d_len, dtype=torch.long, device="cuda"),
               "m": torch.zeros(n, self.d_len, dtype=torch.bool, device="cuda")}
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            for _ in range(3):
                self._maxsim(buf["q"], buf["d"], buf["m"])
        torch.cuda.current_stream().wait_stream(self.side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool, stream=self.side):  # CLEAN: dedicated side stream, warmed up on it
            self.outs[n] = self._maxsim(buf["q"], buf["d"], buf["m"])
        self.bufs[n], self.graphs[n] = buf, g

    def setup(self):
        for n in reversed(self.BUCKETS):
            self._capture_bucket(n)

    @torch.no_grad()
    def rerank(self, q_ids, d_ids, d_mask):
        n = d_ids.shape[0]
        b = next(size for size in self.BUCKETS if size >= n)
        buf = self.bufs[b]
        buf["q"].copy_(q_ids)  # CLEAN: copy into the static query buffer
        if n == b:
            buf["d"], buf["m"] = d_ids, d_mask  # HAZARD: static-address
        else:
            buf["d"].zero_()
            buf["m"].zero_()
            buf["d"][:n].copy_(d_ids)
            buf["m"][:n].copy_(d_mask)
        self.graphs[b].replay()
        vals, idx, _ = self.outs[b]
        return vals.clone(), idx.clone()
