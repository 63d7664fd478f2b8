"""Auto-marking of scanned primary-school arithmetic worksheets.

Each sheet has 40 answer boxes; a box reader recognises up to four digits per
box (ten digits + blank), which are compared with the answer key, with partial
credit for digits in the right place. The marker is compiled with the mode of
the deployment config (classroom server or staging).
"""
from dataclasses import dataclass

import torch
import torch.nn as nn

BOXES, SLOTS, BLANK = 40, 4, 10


@dataclass(frozen=True)
class MarkerConfig:
    compile_mode: str = "reduce-overhead"
    sheets_per_batch: int = 32


CONFIGS = {
    "classroom": MarkerConfig(),
    "staging": MarkerConfig(compile_mode="max-autotune-no-cudagraphs"),  # CLEAN: staging builds run without CUDA graphs
}


class BoxReader(nn.Module):
    def __init__(self, ch=32):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, ch, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(ch, 2 * ch, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(2 * ch, 2 * ch, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d((1, SLOTS)),
        )
        self.cls = nn.Linear(2 * ch, BLANK + 1)

    def forward(self, x):                                   # [N, 1, 32, 96]
        return self.cls(self.conv(x).squeeze(2).transpose(1, 2))   # [N, SLOTS, 11]


class WorksheetMarker(nn.Module):
    def __init__(self):
        super().__init__()
        self.reader = BoxReader()
        self.register_buffer("rubric", torch.ones(BOXES))  # points per question
        self.partial_credit = 0.5

    def forward(self, boxes, key):                          # boxes [S, BOXES, 1, 32, 96], key [S, BOXES, SLOTS]
        s = boxes.shape[0]
        digits = self.reader(boxes.flatten(0, 1)).view(s, BOXES, SLOTS, BLANK + 1).argmax(-1)
        match = (digits == key).float()
        exact = match.prod(-1)
        pc = self.partial_credit  # HAZARD: python-scalar
        score = torch.where(exact > 0, torch.ones_like(exact), pc * match.mean(-1))  # CLEAN: partial credit without a host branch
        marks = (score * self.rubric).sum(-1)
        unanswered = torch.nonzero((digits == BLANK).all(-1))  # HAZARD: dynamic-shape
        print(f"{unanswered.shape[0]} unanswered boxes in batch")  # HAZARD: host-code
        return marks, score, unanswered


class MarkingService:
    def __init__(self, deployment="classroom"):
        cfg = CONFIGS[deployment]
        self.cfg = cfg
        self.marker = WorksheetMarker().cuda().eval()
        self.mark = torch.compile(self.marker, mode=cfg.compile_mode)

    def set_teacher(self, prefs):
        self.marker.partial_credit = prefs["partial_credit"]
        self.marker.rubric = torch.tensor(prefs["points"], dtype=torch.float32, device="cuda")  # HAZARD: static-address

    def reset_rubric(self):
        self.marker.rubric.copy_(torch.ones(BOXES))  # CLEAN: buffer updated in place

    @torch.no_grad()
    def mark_class(self, sheets, key):
        """sheets: [N, BOXES, 1, 32, 96] uint8 crops for one class; key: [BOXES, SLOTS]."""
        out = []
        n = self.cfg.sheets_per_batch
        for i in range(0, sheets.shape[0], n):
            batch = torch.zeros(n, BOXES, 1, 32, 96, device="cuda")
            m = min(n, sheets.shape[0] - i)
            batch[:m] = sheets[i:i + m].cuda().float() / 255.0
            marks, _, _ = self.mark(batch, key.expand(n, -1, -1))
            out.append(marks[:m].cpu())  # CLEAN: copied to the host before the next call
        return torch.cat(out)
