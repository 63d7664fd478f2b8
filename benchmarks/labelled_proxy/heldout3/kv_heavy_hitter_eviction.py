"""Heavy-hitter KV-cache eviction (H2O-style) for a long-context decode server.

When a sequence fills its cache, the cache is compacted to `budget` slots: the
top attention-mass tokens plus a recent window. The compaction is captured through
the `cuda_graph_capture` context manager and eviction callbacks run inside it.
"""
import contextlib
from typing import Sequence

import torch


@contextlib.contextmanager
def cuda_graph_capture(pool, stream):
    g = torch.cuda.CUDAGraph()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.graph(g, pool=pool, stream=stream):  # CLEAN: dedicated side stream, forked before and joined after
        yield g
    torch.cuda.current_stream().wait_stream(stream)


class EvictionStats:
    def __init__(self):
        self.mean_kept_pos = []

    def __call__(self, keep, scores):
        self.mean_kept_pos.append(keep.float().mean().item())  # HAZARD: host-sync


class HeavyHitterCache:
    def __init__(self, layers, batch, heads, max_len, head_dim, budget, recent=64,
                 on_evict: Sequence[EvictionStats] = ()):
        shape = (layers, batch, heads, max_len, head_dim)
        self.k = torch.zeros(shape, device="cuda", dtype=torch.half)
        self.v = torch.zeros(shape, device="cuda", dtype=torch.half)
        self.pos = torch.zeros(layers, batch, heads, max_len, dtype=torch.long, device="cuda")
        self.acc_scores = torch.zeros(layers, batch, heads, max_len, device="cuda")
        self.max_len, self.budget, self.recent = max_len, budget, recent
        self.high_water = max_len - 512  # prefill chunks can overshoot it by up to 512 tokens
        self.cur_len = max_len
        self.positions_host = list(range(max_len))
        self.on_evict = list(on_evict)
        self.score_stream = torch.cuda.Stream()
        self.capture_stream = torch.cuda.Stream()
        self.pool = torch.cuda.graph_pool_handle()
        self.graph = None

    def _select(self, scores):
        n = self.cur_len  # HAZARD: python-scalar
        heavy = scores[..., : n - self.recent].topk(self.budget - self.recent, dim=-1).indices  # CLEAN: k is the fixed budget
        recent = torch.arange(n - self.recent, n, device=scores.device).expand(*heavy.shape[:-1], -1)
        return torch.cat([heavy, recent], -1).sort(-1).values

    def _compact(self):
        with torch.cuda.stream(self.score_stream):  # HAZARD: stream
            norm = self.acc_scores / self.acc_scores.sum(-1, keepdim=True).clamp_min(1e-6)
        keep = self._select(norm)
        idx = keep[..., None].expand(-1, -1, -1, -1, self.k.shape[-1])
        self.k[..., : self.budget, :] = self.k.gather(3, idx)  # CLEAN: fixed-size gather/scatter into the same buffer
        self.v[..., : self.budget, :] = self.v.gather(3, idx)
        pos_host = torch.tensor(self.positions_host[: self.max_len], dtype=torch.long, pin_memory=True)  # HAZARD: pinned-memory
        abs_pos = pos_host.to("cuda", non_blocking=True)[keep]
        self.pos[..., : self.budget] = abs_pos
        kept_scores = norm.gather(-1, keep)
        dead = (kept_scores == 0).nonzero()  # HAZARD: dynamic-shape
        self.dead_tokens = dead.shape[0]
        self.acc_scores.zero_()
        self.acc_scores[..., : self.budget] = kept_scores
        for cb in self.on_evict:
            cb(keep, kept_scores)

    def capture(self, warmup=2):
        for _ in range(warmup):
            self._compact()
        torch.cuda.synchronize()
        with cuda_graph_capture(self.pool, self.capture_stream) as g:
            self._compact()
        self.graph = g

    @torch.no_grad()
    def maybe_evict(self, cur_len, first_abs_pos):
        if cur_len < self.high_water:
            return cur_len
        self.cur_len = cur_len
        self.positions_host = list(range(first_abs_pos, first_abs_pos + self.max_len))
        if self.graph is None:
            self.capture()
        self.graph.replay()
        return self.budget
