"""Adaptive reading level for an e-reader app.

When a reader opens a chapter, the service grades its difficulty (a US grade
level, calibrated per reader from their look-up history) and marks hard
words so the app can pre-fetch dictionary cards. The grading function is
compiled with the mode named in the service config.
"""
import dataclasses

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, D, MAX_LEN = 50000, 192, 2048


@dataclasses.dataclass
class ServeConfig:
    compile_mode: str = "reduce-overhead"
    pad_to: int = 0


class ReadabilityModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D, padding_idx=0)
        self.conv = nn.Sequential(nn.Conv1d(D, D, 5, padding=2), nn.GELU(), nn.Conv1d(D, D, 5, padding=4, dilation=2), nn.GELU())
        self.word = nn.Linear(D, 1)
        self.grade = nn.Linear(2 * D, 1)
        self.grade_offset = 0.0

    def forward(self, ids):
        mask = (ids != 0).float()
        h = self.conv(self.emb(ids).transpose(1, 2)).transpose(1, 2)
        hard = torch.sigmoid(self.word(h)).squeeze(-1) * mask
        mean = (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
        pooled = torch.cat([mean, h.masked_fill(mask[..., None] == 0, -1e4).amax(1)], -1)
        return self.grade(pooled).squeeze(-1) + self.grade_offset, hard  # HAZARD: python-scalar


class ChapterGrader:
    def __init__(self, model, cfg: ServeConfig):
        self.model, self.cfg = model.cuda().eval(), cfg
        self.grade = torch.compile(self._grade_chapter, mode=cfg.compile_mode)

    def set_reader(self, profile):
        self.model.grade_offset = profile["offset"]

    def _grade_chapter(self, ids):
        grade, hard = self.model(ids)
        hard_frac = (hard > 0.5).float().mean().item()  # HAZARD: host-sync
        print("graded chapter, grade:", grade)  # HAZARD: host-code
        return grade, hard, hard_frac

    @torch.no_grad()
    def open_chapter(self, ids):
        if self.cfg.pad_to:
            ids = F.pad(ids, (0, self.cfg.pad_to - ids.shape[1]))
        grade, hard, frac = self.grade(ids)
        top = hard[0].topk(min(32, ids.shape[1])).indices
        return float(grade[0]), top.tolist(), frac


if __name__ == "__main__":
    model = ReadabilityModel()
    live = ChapterGrader(model, ServeConfig())
    live_padded = ChapterGrader(model, ServeConfig(pad_to=MAX_LEN))
    staging = ChapterGrader(model, ServeConfig(compile_mode="max-autotune-no-cudagraphs"))
    readers = [{"id": i, "offset": 0.1 * (i % 17) - 0.8} for i in range(100)]
    for r in readers:
        live.set_reader(r)
        for ch in range(5):
            n = int(torch.randint(300, MAX_LEN, ()))
            ids = torch.randint(1, VOCAB, (1, n), device="cuda")
            grade, hard_words, frac = live.open_chapter(ids)  # HAZARD: dynamic-shape
            grade_p, _, _ = live_padded.open_chapter(ids)  # CLEAN: padded to MAX_LEN, one graph
            grade_s, _, _ = staging.open_chapter(ids)  # CLEAN: staging config compiles without CUDA graphs
