"""Backend for a browser extension that highlights the key sentences of the page you read.

The extension POSTs the page's sentences to /highlight; a small sentence scorer compiled
with mode="reduce-overhead" ranks them. Runs with `uvicorn server:app --workers 1`.
"""
import logging
import threading
import time

import torch
import torch.nn as nn
from fastapi import FastAPI
from pydantic import BaseModel

log = logging.getLogger("highlighter")
app = FastAPI()
MAX_SENT, MAX_TOK, VOCAB = 64, 48, 32000
_lock = threading.Lock()


class SentenceScorer(nn.Module):
    def __init__(self, d=192):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, d)
        self.ctx = nn.GRU(d, d, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * d, 1)

    def forward(self, ids, offsets_mask, position_bias):
        s, t = ids.shape
        e = self.emb(ids).mean(1)
        h, _ = self.ctx(e[None])
        scores = self.out(h[0]).squeeze(-1)
        position_bias.mul_(0.5)  # HAZARD: static-address
        scores = scores + position_bias
        log.info("scored %d sentences", s)  # HAZARD: host-code
        top = scores.topk(min(3, s)).indices.tolist()  # HAZARD: host-sync
        return scores.masked_fill(offsets_mask == 0, -1e4), top


model = SentenceScorer().cuda().eval()
scorer = torch.compile(model, mode="reduce-overhead")


class Page(BaseModel):
    sentences: list[str]
    pad: bool = False


def encode(sentences, pad):
    rows = [[hash(w) % VOCAB for w in s.split()][:MAX_TOK] or [0] for s in sentences[:MAX_SENT]]
    n_sent = MAX_SENT if pad else len(rows)
    ids = torch.zeros(n_sent, MAX_TOK, dtype=torch.long)
    mask = torch.zeros(n_sent)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = torch.tensor(r)
        mask[i] = 1
    pos = torch.linspace(1.0, 0.0, n_sent)
    return ids.cuda(), mask.cuda(), pos.cuda()  # CLEAN: eager uploads before the compiled call


@app.post("/highlight")
def highlight(page: Page):
    t0 = time.perf_counter()  # CLEAN: eager timing in the request handler
    ids, mask, pos = encode(page.sentences, page.pad)
    with _lock, torch.no_grad():
        if page.pad:
            scores, top = scorer(ids, mask, pos)  # CLEAN: fixed MAX_SENT shape
        else:
            scores, top = scorer(ids, mask, pos)  # HAZARD: dynamic-shape
        ranked = scores[: len(page.sentences)].cpu().tolist()  # CLEAN: host copy right after the call
    log.info("request took %.1f ms", 1e3 * (time.perf_counter() - t0))  # CLEAN: eager logging
    return {"scores": ranked, "top": top}


@app.get("/health")
def health():
    return {"ok": True, "cuda": torch.cuda.is_available()}
