"""Oral reading fluency (words correct per minute, WCPM) for a primary-school
reading app: a child's recording is aligned to the passage words by attention and
each word is scored correct / miscue. The compile mode comes from a dataclass.
"""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class ServeConfig:
    mode: str = "reduce-overhead"
    dynamic: bool = False
    max_words: int = 128
    max_frames: int = 3000  # 30 s of 10 ms log-mel frames


LIVE = ServeConfig()
STAGING = ServeConfig(mode="max-autotune-no-cudagraphs")
GRADE_BANDS = (40.0, 70.0, 100.0, 130.0)  # WCPM benchmarks, grades 1-4


class WordScorer(nn.Module):
    def __init__(self, n_mels=80, d=192, vocab=8000):
        super().__init__()
        self.audio = nn.Sequential(nn.Conv1d(n_mels, d, 5, stride=2, padding=2), nn.GELU(),
                                   nn.Conv1d(d, d, 5, stride=2, padding=2))
        self.words = nn.Embedding(vocab, d)
        self.out = nn.Linear(d, 1)

    def forward(self, mels, word_ids):
        a = self.audio(mels).transpose(1, 2)  # (B, F', d), 40 ms per frame
        w = self.words(word_ids)  # (B, W, d)
        att = torch.softmax(w @ a.transpose(1, 2) / a.shape[-1] ** 0.5, -1)
        p_correct = torch.sigmoid(self.out((att @ a) * w)).squeeze(-1)
        print("first word scores", p_correct[0, :8])  # HAZARD: host-code
        onset = att.argmax(-1).float() * 0.04
        return p_correct, (onset.amax(-1) - onset.amin(-1)) / 60.0  # reading span in minutes


class FluencyService:
    def __init__(self, model, cfg: ServeConfig):
        self.cfg = cfg
        self.model = torch.compile(model.cuda().eval(), mode=cfg.mode, dynamic=cfg.dynamic)
        self.band = torch.compile(self._band, mode=cfg.mode, dynamic=cfg.dynamic)
        self.history = []

    @staticmethod
    def _band(wcpm):
        return sum((wcpm >= edge).long() for edge in GRADE_BANDS)

    @torch.no_grad()
    def score_padded(self, mels, word_ids):
        n = word_ids.shape[-1]
        m = F.pad(mels, (0, self.cfg.max_frames - mels.shape[-1]))
        w = F.pad(word_ids, (0, self.cfg.max_words - n))
        p, span = self.model(m, w)  # CLEAN: padded to the configured maxima, a single graph
        p = p[:, :n].clone()  # CLEAN: cloned before the next compiled call
        wcpm = (p > 0.5).sum(-1) / span.clamp_min(1 / 60)
        return wcpm, self.band(wcpm), (p < 0.5).float().mean(-1)

    @torch.no_grad()
    def score_raw(self, mels, word_ids):
        p, span = self.model(mels, word_ids)  # HAZARD: dynamic-shape
        self.history.append(p)  # HAZARD: static-address
        wcpm = (p > 0.5).sum(-1) / span.clamp_min(1 / 60)
        band = self.band(wcpm)
        miscue_rate = (p < 0.5).float().mean(-1)  # HAZARD: static-address
        return wcpm, band, miscue_rate


if __name__ == "__main__":
    live, staging = FluencyService(WordScorer(), LIVE), FluencyService(WordScorer(), STAGING)
    for n_words, n_frames in [(54, 1800), (97, 2600), (33, 1200)]:
        mels = torch.randn(1, 80, n_frames, device="cuda")
        ids = torch.randint(0, 8000, (1, n_words), device="cuda")
        print(live.score_padded(mels, ids)[0].item())
        live.score_raw(mels, ids)
        staging.score_raw(mels, ids)  # CLEAN: staging config compiles without CUDA graphs
