"""Micro-benchmarks of search-box query-autocomplete scorers: cases are partials handed to a graph bench helper."""
import functools
import time
import torch
import torch.nn.functional as F

CASES = {}

def case(name):
    def deco(fn):
        CASES[name] = fn
        return fn
    return deco

KNOBS = {"prefix_boost": 1.5}

class Trie:
    def __init__(self, n_nodes=65536, fanout=32, device="cuda"):
        self.children = torch.randint(0, n_nodes, (n_nodes, fanout), device=device)
        self.popularity = torch.rand(n_nodes, device=device)
        self.rerank = torch.nn.Linear(2, 1, device=device)

@case("popularity_topk")
def popularity_topk(trie, prefix_nodes, k=10):
    cand = trie.children[prefix_nodes]
    return torch.topk(trie.popularity[cand], k, dim=-1)  # CLEAN: fixed-k topk, static shapes

@case("boosted")
def boosted(trie, prefix_nodes, k=10):
    cand = trie.children[prefix_nodes]
    boost = KNOBS["prefix_boost"]  # HAZARD: python-scalar
    return torch.topk(trie.popularity[cand] * boost, k, dim=-1)

@case("neural_rerank")
def neural_rerank(trie, prefix_nodes, k=10):
    cand = trie.children[prefix_nodes]
    feats = torch.stack([trie.popularity[cand], cand.float() / 65536.0], -1)
    return trie.rerank(feats).squeeze(-1)

@case("dedup_list")
def dedup_list(trie, prefix_nodes, k=10):
    cand = trie.children[prefix_nodes]
    seen = cand[0].tolist()  # HAZARD: host-sync
    return cand[:, : len(set(seen))]

@case("threshold")
def threshold(trie, prefix_nodes, k=10):
    scores = trie.popularity[trie.children[prefix_nodes]]
    return scores[scores > 0.5]  # HAZARD: dynamic-shape

@case("masked_threshold")
def masked_threshold(trie, prefix_nodes, k=10):
    scores = trie.popularity[trie.children[prefix_nodes]]
    return scores.masked_fill(scores <= 0.5, 0.0)  # CLEAN: masked_fill keeps the shape

class GraphBench:
    def __init__(self, amp=False, warmup=3, iters=50):
        self.amp, self.warmup, self.iters = amp, warmup, iters
    def _warm(self, fn):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(self.warmup):
                fn()  # CLEAN: warm-up on a forked side stream
        torch.cuda.current_stream().wait_stream(s)
    def capture(self, fn):
        self._warm(fn)
        g = torch.cuda.CUDAGraph()
        with torch.autocast("cuda", dtype=torch.float16, enabled=self.amp):  # HAZARD: autocast-cache
            with torch.cuda.graph(g):
                out = fn()
        return g, out
    def time(self, g):
        torch.cuda.synchronize()  # CLEAN: sync outside the capture
        t0 = time.perf_counter()
        for _ in range(self.iters):
            g.replay()
        torch.cuda.synchronize()
        return 1e6 * (time.perf_counter() - t0) / self.iters

def sweep_boost(bench, trie, prefix):
    g, out = bench.capture(functools.partial(boosted, trie, prefix))
    rows = []
    for b in (1.0, 1.5, 2.0, 3.0):
        KNOBS["prefix_boost"] = b
        rows.append((b, bench.time(g), out.values[:, 0].mean().item()))  # CLEAN: host read after replays
    return rows

def main(batch=1024):
    trie = Trie()
    prefix = torch.randint(0, 65536, (batch,), device="cuda")
    bench = GraphBench(amp=True)
    table = {}
    for name, fn in CASES.items():
        g, _ = bench.capture(functools.partial(fn, trie, prefix))
        table[name] = bench.time(g)
    table["boost_sweep"] = sweep_boost(bench, trie, prefix)
    return table
