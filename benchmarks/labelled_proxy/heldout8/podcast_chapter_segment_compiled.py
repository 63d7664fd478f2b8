"""Automatic chapters for a podcast hosting service.

Transcript sentences are embedded upstream; a transformer scores each sentence
as a topic boundary, local maxima become chapter starts, and a topic head
labels each chapter for the title template.  Everything hot is compiled with
one shared set of keyword arguments.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger(__name__)
COMPILE_KW = dict(mode="reduce-overhead", dynamic=False)
D, MAX_SENT, MAX_CH, N_TOPICS = 768, 1024, 32, 120


class BoundaryScorer(nn.Module):
    def __init__(self, d=384):
        super().__init__()
        self.inp = nn.Linear(D, d)
        self.tf = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 6, 4 * d, batch_first=True), 4)
        self.out = nn.Linear(d, 1)

    def forward(self, sents):
        return self.out(self.tf(self.inp(sents))).squeeze(-1)


class TopicHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(D, 512), nn.GELU(), nn.Linear(512, N_TOPICS))

    def forward(self, seg):
        return self.mlp(seg).softmax(-1)


def _peaks(logits, min_gap):
    p = torch.sigmoid(logits)
    local_max = (p == F.max_pool1d(p[None], 2 * min_gap + 1, 1, min_gap)[0]) & (p > 0.5)
    log.debug("boundary scores ready for %d sentences", p.shape[-1])  # HAZARD: host-code
    return local_max.tolist()  # HAZARD: host-sync


def _pk(pred, gold):
    return (pred != gold).float().mean().item()  # CLEAN: default torch.compile, no CUDA graphs


class Chapterizer:
    def __init__(self, scorer, topics):
        self.score = torch.compile(scorer.cuda().eval(), **COMPILE_KW)
        self.topics = torch.compile(topics.cuda().eval(), **COMPILE_KW)
        self.peaks = torch.compile(_peaks, **COMPILE_KW)
        self.pk = torch.compile(_pk)

    @torch.inference_mode()
    def chapters(self, sent_emb):
        n = sent_emb.shape[0]
        logits = self.score(F.pad(sent_emb, (0, 0, 0, MAX_SENT - n))[None])  # CLEAN: padded to MAX_SENT sentences
        probs = torch.sigmoid(logits[0, :n]).clone()  # CLEAN: read before any other compiled call
        keep = self.peaks(logits[0], 3)
        starts = [0] + [i for i in range(1, n) if keep[i]][: MAX_CH - 1]
        seg = torch.zeros(MAX_CH, D, device="cuda")
        for c, (a, b) in enumerate(zip(starts, starts[1:] + [n])):
            seg[c] = sent_emb[a:b].mean(0)
        topic = self.topics(seg).argmax(-1).clone()
        conf = torch.sigmoid(logits[0, starts])  # HAZARD: static-address
        return [(s, int(t), float(c)) for s, t, c in zip(starts, topic[: len(starts)].tolist(), conf.tolist())], probs

    @torch.inference_mode()
    def preview(self, first_sents):
        logits = self.score(first_sents[None])  # HAZARD: dynamic-shape
        return torch.sigmoid(logits[0])


if __name__ == "__main__":
    ch = Chapterizer(BoundaryScorer(), TopicHead())
    for n in (412, 655, 980):
        chapters, probs = ch.chapters(torch.randn(n, D, device="cuda"))
        print(chapters[:3])
    for k in (20, 35, 50):
        ch.preview(torch.randn(k, D, device="cuda"))
    gold = torch.rand(500, device="cuda") > 0.97
    print(ch.pk(gold, gold))
