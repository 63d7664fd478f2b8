"""Latency harness for a cross-encoder re-ranker: eager vs CUDA graph vs reduce-overhead.

`Harness.measure` takes any callable over (ids, mask) and a mode name; scoring
variants are registered in `VARIANTS`.  p50/p99 are computed from CUDA events.
The recorded batches are padded to the longest query-passage pair of each batch.
"""
import statistics

import torch
import torch.nn as nn

VARIANTS = {}


def variant(name):
    def deco(fn):
        VARIANTS[name] = fn
        return fn
    return deco


class CrossEncoder(nn.Module):
    def __init__(self, vocab=30522, d=384, layers=6, max_len=512):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(1, max_len, d))
        layer = nn.TransformerEncoderLayer(d, 6, 4 * d, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers)
        self.score = nn.Linear(d, 1)

    def forward(self, ids, mask):
        h = self.emb(ids) + self.pos[:, : ids.shape[1]]
        h = self.enc(h, src_key_padding_mask=~mask)
        return self.score(h[:, 0]).squeeze(-1)


@variant("full")
def score_full(model, ids, mask):
    return model(ids, mask)


@variant("trim")
def score_trimmed(model, ids, mask):
    longest = mask.sum(dim=1).max()
    return model(ids[:, :longest], mask[:, :longest])  # HAZARD: host-sync


@variant("per_query")
def score_per_query(model, ids, mask, group=10):
    lengths = mask.sum(dim=1).tolist()  # HAZARD: host-sync
    scores = model(ids, mask)
    return scores.view(-1, group).softmax(-1).flatten(), lengths


class Harness:
    def __init__(self, model, warmup=5, iters=200):
        self.model = model.cuda().eval()
        self.warmup, self.iters = warmup, iters
        self.kept = []

    def _time(self, run):
        times = []
        for _ in range(self.iters):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            run()
            b.record()
            b.synchronize()  # CLEAN: host wait outside any capture
            times.append(a.elapsed_time(b))
        times.sort()
        return statistics.median(times), times[int(0.99 * len(times)) - 1]

    @torch.no_grad()
    def measure(self, name, fn, batches, mode):
        ids, mask = batches[0]
        if mode == "eager":
            return self._time(lambda: fn(self.model, ids, mask))
        if mode == "graph":
            s = torch.cuda.Stream()
            g = torch.cuda.CUDAGraph()
            with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(self.warmup):
                        fn(self.model, ids, mask)
                torch.cuda.current_stream().wait_stream(s)
                with torch.cuda.graph(g):
                    out = fn(self.model, ids, mask)
            res = self._time(g.replay)
            self.kept.append(out)  # CLEAN: one graph per variant, never replayed after this
            return res
        compiled = torch.compile(lambda i, m: fn(self.model, i, m), mode="reduce-overhead")
        for i, m in batches:
            compiled(i, m)  # HAZARD: dynamic-shape
        return self._time(lambda: compiled(ids, mask))


def main(batches):
    h = Harness(CrossEncoder())
    rows = {}
    for name, fn in VARIANTS.items():
        for mode in ("eager", "graph", "compile"):
            rows[(name, mode)] = h.measure(name, fn, batches, mode)
    return rows
