"""Search-box query autocomplete for a web portal.

A GRU encodes the typed prefix (bytes); candidates are the 200k most popular
queries, scored by dot product + log-popularity + a decaying trending boost,
with a little Gumbel noise for diversity.  One CUDA graph per batch bucket.
"""
import time

import torch
import torch.nn as nn

N_CAND, D, K, MAX_PREFIX = 200_000, 256, 8, 48
BUCKETS = (1, 4, 16)


class PrefixEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(257, 64, padding_idx=256)
        self.gru = nn.GRU(64, D, num_layers=2, batch_first=True)

    def forward(self, prefix):
        out, _ = self.gru(self.emb(prefix))
        return out[:, -1]


class AutocompleteServer:
    def __init__(self, enc, cand_emb, log_pop, trend_start_s, seed=0):
        self.enc = enc.cuda().eval()
        self.cand = cand_emb.cuda()
        self.pop = log_pop.cuda()
        self.trend_start = trend_start_s.cuda()
        self.trend_boost = torch.full((N_CAND,), 2.0, device="cuda")
        self.impressions = torch.zeros(N_CAND, device="cuda")
        self.div_gen = torch.Generator(device="cuda")
        self.div_gen.manual_seed(seed)
        self.log_stream = torch.cuda.Stream()
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.state = {}, {}
        self.recent_scores = []

    def _serve(self, st):
        q = self.enc(st["prefix"])
        s = q @ self.cand.T + self.pop
        age_h = (time.time() - self.trend_start) / 3600.0  # HAZARD: host-code
        s = s + torch.exp(-age_h / 6.0) * self.trend_boost
        u = torch.rand(s.shape, device="cuda", generator=self.div_gen).clamp_(1e-9, 1 - 1e-9)  # HAZARD: rng
        top = torch.topk(s - 0.1 * torch.log(-torch.log(u)), K, dim=-1)  # CLEAN: topk has a fixed output shape
        st["host_idx"].copy_(top.indices, non_blocking=True)  # CLEAN: D2H into pinned memory, captured as a memcpy node
        with torch.cuda.stream(self.log_stream):  # HAZARD: stream
            self.impressions.index_add_(0, top.indices.flatten(), torch.ones(top.indices.numel(), device="cuda"))
        return top.values

    @torch.no_grad()
    def capture(self):
        side = torch.cuda.Stream()
        for b in sorted(BUCKETS, reverse=True):
            st = {"prefix": torch.full((b, MAX_PREFIX), 256, dtype=torch.long, device="cuda"),
                  "host_idx": torch.empty(b, K, dtype=torch.long).pin_memory()}
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    self._serve(st)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):
                st["scores"] = self._serve(st)
            self.graphs[b], self.state[b] = g, st

    def complete(self, prefixes):
        n = len(prefixes)
        b = min(k for k in BUCKETS if k >= n)
        st = self.state[b]
        st["prefix"].fill_(256)
        for i, p in enumerate(prefixes):
            raw = torch.tensor(list(p.encode()[-MAX_PREFIX:]), dtype=torch.long)
            st["prefix"][i, MAX_PREFIX - raw.numel():].copy_(raw)  # CLEAN: host bytes copied before the replay
        self.graphs[b].replay()
        self.recent_scores.append(st["scores"])  # HAZARD: static-address
        torch.cuda.current_stream().synchronize()
        return st["host_idx"][:n].tolist()


if __name__ == "__main__":
    srv = AutocompleteServer(PrefixEncoder(), torch.randn(N_CAND, D), torch.randn(N_CAND),
                             torch.full((N_CAND,), time.time() - 7200, dtype=torch.float64))
    srv.capture()
    for typed in (["how to"], ["weather in", "best pizza", "py"], ["a"] * 9):
        print(srv.complete(typed))
