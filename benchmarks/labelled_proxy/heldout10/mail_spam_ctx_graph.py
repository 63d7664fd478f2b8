"""Inbound-mail spam scoring for a hosted email service.

Each message is reduced to a hashed bag of header/body tokens plus URL and
attachment features; a small MLP scores spam probability. A context manager
captures the scoring step into a CUDA graph that the MTA replays for every
512-message batch.
"""
import contextlib
import logging

import torch
import torch.nn as nn

log = logging.getLogger("spamd")
HASH, B, MAX_TOKENS, N_URL = 2 ** 18, 512, 384, 6


@contextlib.contextmanager
def graph_capture(pool=None):
    g = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()  # CLEAN: synchronize before the capture starts
    with torch.cuda.graph(g, pool=pool):  # HAZARD: api-misuse
        yield g


class SpamScorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(HASH, 64, mode="sum")
        self.mlp = nn.Sequential(nn.Linear(64 + N_URL, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, tokens, url_feats):
        return self.mlp(torch.cat([self.bag(tokens), url_feats], -1)).squeeze(-1)


class MailFilter:
    def __init__(self, model, device="cuda"):
        self.model = model.eval().to(device)
        self.tokens = torch.zeros(B, MAX_TOKENS, dtype=torch.long, device=device)
        self.urls = torch.zeros(B, N_URL, device=device)
        self.scan_stream = torch.cuda.Stream()
        self.attach_risk = torch.zeros(B, device=device)
        self.spam_rate = 0.0
        self.graph = None
        self.out = None

    def _score(self):
        log.info("scoring mail batch")  # CLEAN: plain-string log, no tensor is formatted
        p = torch.sigmoid(self.model(self.tokens, self.urls))
        with torch.cuda.stream(self.scan_stream):  # HAZARD: stream
            self.attach_risk.copy_(self.urls[:, 4] * 0.5 + self.urls[:, 5])
        self.spam_rate = (p > 0.9).float().mean().item()  # HAZARD: host-sync
        quarantined = (p > 0.9).nonzero().squeeze(1)  # HAZARD: dynamic-shape
        verdict = torch.where(p > 0.9, 2, torch.where(p > 0.5, 1, 0))  # CLEAN: torch.where verdicts, static shape
        return p, verdict, quarantined

    @torch.no_grad()
    def capture(self):
        with graph_capture() as g:
            self.out = self._score()
        self.graph = g

    def filter(self, tokens, urls):
        self.tokens.copy_(tokens)
        self.urls.copy_(urls)
        self.graph.replay()
        p, verdict, _ = self.out
        return verdict.cpu(), p.cpu()  # CLEAN: host copies after the replay, outside the graph


def mta_loop(mail_filter, inbox):
    mail_filter.capture()
    for batch in inbox.batches(B):
        verdict, p = mail_filter.filter(batch.tokens.cuda(non_blocking=True), batch.urls.cuda(non_blocking=True))
        for msg, v in zip(batch.messages, verdict.tolist()):
            inbox.deliver(msg, folder=("inbox", "promotions", "quarantine")[v])


if __name__ == "__main__":
    scorer = SpamScorer()
    scorer.load_state_dict(torch.load("spam_mlp.pt", map_location="cpu"))
    mta_loop(MailFilter(scorer), inbox=None)
