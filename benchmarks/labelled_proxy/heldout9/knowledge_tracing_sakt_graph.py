"""SAKT knowledge tracing for an adaptive-practice tutor.

Given each student's last L interactions, predict the chance of answering the next exercise
correctly and recommend curriculum exercises whose difficulty is closest to the ability.
The scoring step is captured once per batch bucket with capture_begin/capture_end.
"""
import math
import time

import numpy as np
import torch
import torch.nn as nn


class SAKT(nn.Module):
    def __init__(self, n_items, d=128, L=100):
        super().__init__()
        self.n_items = n_items
        self.inter = nn.Embedding(2 * n_items + 1, d)
        self.item = nn.Embedding(n_items + 1, d)
        self.pos = nn.Parameter(torch.randn(L, d) * 0.02)
        self.wq, self.wk, self.wv = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.ffn = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.out = nn.Linear(d, 1)
        self.register_buffer("causal", torch.triu(torch.ones(L, L, dtype=torch.bool), 1))

    def forward(self, past_q, past_r, next_q):
        x = self.inter(past_q + self.n_items * past_r) + self.pos
        e = self.item(next_q)
        s = self.wq(e) @ self.wk(x).transpose(1, 2) / math.sqrt(e.shape[-1])
        s = s.masked_fill(self.causal, float("-inf"))  # CLEAN: masked_fill keeps the shape static
        h = self.ln1(s.softmax(-1) @ self.wv(x) + e)
        h = self.ln2(h + self.ffn(h))
        return self.out(h).squeeze(-1).sigmoid()


class MasteryService:
    def __init__(self, model, item_difficulty, curriculum_skills, L=100):
        self.model = model.eval().cuda()
        self.L = L
        self.item_difficulty_np = np.asarray(item_difficulty, dtype=np.float32)
        self.curriculum_skills = list(curriculum_skills)
        self.session_start = time.time()
        self.half_life_s = 24 * 3600.0
        self.buckets = {}

    def _score(self, past_q, past_r, next_q):
        p = self.model(past_q, past_r, next_q)
        difficulty = torch.from_numpy(self.item_difficulty_np).to("cuda", non_blocking=True)  # HAZARD: pinned-memory
        elapsed = time.time() - self.session_start  # HAZARD: host-code
        decay = math.exp(-elapsed / self.half_life_s)
        p_next = p[:, -1] * decay + (1.0 - decay) * (1.0 - difficulty[next_q[:, -1]])
        focus = torch.tensor(self.curriculum_skills, device=p.device)  # HAZARD: host-sync
        ability = torch.logit(p_next.clamp(1e-4, 1 - 1e-4))
        gap = (ability[:, None] - torch.logit(difficulty[focus].clamp(1e-4, 1 - 1e-4))[None]).abs()
        rec = focus[gap.topk(5, dim=1, largest=False).indices]
        mastered = (p_next > 0.95).nonzero()  # HAZARD: dynamic-shape
        return p_next, rec, mastered

    @torch.no_grad()
    def capture(self, sizes=(16, 64, 256)):
        self.pool = torch.cuda.graph_pool_handle()
        for b in sorted(sizes, reverse=True):
            sq = torch.ones(b, self.L, dtype=torch.long, device="cuda")
            sr = torch.zeros_like(sq)
            nq = torch.ones_like(sq)
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    self._score(sq, sr, nq)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            g.capture_begin(pool=self.pool)  # HAZARD: stream
            out = self._score(sq, sr, nq)
            g.capture_end()
            self.buckets[b] = (g, (sq, sr, nq), out)

    def predict(self, past_q, past_r, next_q):
        n = past_q.shape[0]
        b = min(k for k in self.buckets if k >= n)
        g, (sq, sr, nq), out = self.buckets[b]
        sq[:n].copy_(past_q)  # CLEAN: copy_ into the static input
        sr[:n].copy_(past_r)
        nq[:n].copy_(next_q)
        g.replay()
        return out[0][:n].clone(), out[1][:n].clone()


if __name__ == "__main__":
    n_items = 1200
    svc = MasteryService(SAKT(n_items), np.random.rand(n_items + 1), curriculum_skills=range(40, 90))
    svc.capture()
    for _ in range(100):
        k = np.random.randint(1, 200)
        q = torch.randint(1, n_items, (k, 100), device="cuda")
        r = torch.randint(0, 2, (k, 100), device="cuda")
        p, rec = svc.predict(q, r, torch.roll(q, -1, 1))
        print("mean p(correct)", float(p.mean()))  # CLEAN: host read after replay
