"""Spaced-repetition review scheduler for a language-learning classroom app.

Neural half-life regression: an MLP over practice history and a lexeme
embedding predicts log2 of the memory half-life; the recall probability is
p = 2 ** (-days_since_practice / half_life). Before each session the scheduler
rescores the learner's whole deck; that step is captured once through a
context manager and replayed for every learner.
"""
import contextlib
import logging
import time

import torch
import torch.nn as nn

log = logging.getLogger("srs")
DECK, N_FEAT, N_LEXEMES = 4096, 6, 50000


@contextlib.contextmanager
def cuda_graph_capture(pool=None):
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with torch.cuda.graph(g, pool=pool, stream=s):  # HAZARD: api-misuse
            yield g
    torch.cuda.current_stream().wait_stream(s)


class HalfLifeNet(nn.Module):
    def __init__(self, emb=32, width=64):
        super().__init__()
        self.lex = nn.Embedding(N_LEXEMES, emb)
        self.mlp = nn.Sequential(nn.Linear(N_FEAT + emb, width), nn.ReLU(), nn.Linear(width, 1))

    def forward(self, feats, lexeme):
        return self.mlp(torch.cat([feats, self.lex(lexeme)], -1)).squeeze(-1).clamp(-4.0, 10.0)


class ReviewScheduler:
    def __init__(self, model, threshold=0.85):
        self.model = model.cuda().eval()
        self.threshold = threshold
        self.feats = torch.zeros(DECK, N_FEAT, device="cuda")        # sqrt(#seen), sqrt(#right), sqrt(#wrong), ...
        self.lexeme = torch.zeros(DECK, dtype=torch.long, device="cuda")
        self.last_seen = torch.zeros(DECK, dtype=torch.float64, device="cuda")   # days since epoch
        self.valid = torch.zeros(DECK, dtype=torch.bool, device="cuda")
        self.p_recall = torch.zeros(DECK, device="cuda")
        self.order = torch.zeros(DECK, dtype=torch.long, device="cuda")
        self.graph = None

    @torch.no_grad()
    def _score(self):
        log.debug("rescoring deck")  # CLEAN: plain string, no tensor is formatted
        now_days = time.time() / 86400.0  # HAZARD: host-code
        delta = (now_days - self.last_seen).clamp_min(0.0).float()
        half_life = torch.exp2(self.model(self.feats, self.lexeme))
        p = torch.exp2(-delta / half_life)
        self.p_recall.copy_(p)
        log.debug(f"deck mean recall {p.mean():.3f}")  # HAZARD: host-sync
        self.due_lexemes = self.lexeme[torch.nonzero((p < self.threshold) & self.valid).flatten()]  # HAZARD: dynamic-shape
        priority = torch.where(self.valid & (p < self.threshold), p, torch.full_like(p, 2.0))  # CLEAN: fixed-shape selection
        self.order.copy_(torch.argsort(priority))

    def capture(self):
        with cuda_graph_capture() as g:
            self._score()
        self.graph = g

    def next_session(self, learner, n_cards=20):
        n = learner["feats"].shape[0]
        self.valid.zero_()
        self.valid[:n] = True
        self.feats[:n].copy_(learner["feats"])
        self.lexeme[:n].copy_(learner["lexeme"])
        self.last_seen[:n].copy_(learner["last_seen"])
        self.graph.replay()
        p = self.p_recall[self.order[:n_cards]]
        return self.order[:n_cards].tolist(), p.cpu().tolist()  # CLEAN: host reads after the replay
