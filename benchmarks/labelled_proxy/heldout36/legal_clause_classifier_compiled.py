"""Contract clause-type classifier (small encoder) trained and served with reduce-overhead."""
from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Final, Protocol

import torch
from torch import Tensor, nn

MAX_LEN: Final[int] = 256
VOCAB: Final[int] = 30_000
N_CLAUSES: Final[int] = 41


class Pooling(enum.Enum):
    CLS = "cls"
    MEAN = "mean"


class Tokenizer(Protocol):
    def encode(self, text: str) -> list[int]: ...


class HashTokenizer:
    def encode(self, text: str) -> list[int]:
        return [hash(w) % VOCAB for w in text.lower().split()][:MAX_LEN]


@dataclass(slots=True)
class TrainKnobs:
    label_smoothing: float = 0.0
    warmup_steps: int = 100
    timings: list[float] = field(default_factory=list)


class ClauseEncoder(nn.Module):
    def __init__(self, pooling: Pooling) -> None:
        super().__init__()
        self.pooling: Pooling = pooling
        self.emb: nn.Embedding = nn.Embedding(VOCAB, 256)
        layer = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)
        self.enc: nn.TransformerEncoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.cls: nn.Linear = nn.Linear(256, N_CLAUSES)

    def forward(self, ids: Tensor, mask: Tensor) -> Tensor:
        longest: int = int(mask.sum(-1).max())  # HAZARD: host-sync
        h: Tensor = self.enc(self.emb(ids[:, :longest]), src_key_padding_mask=~mask[:, :longest])
        match self.pooling:  # CLEAN: pooling enum fixed at construction
            case Pooling.CLS:
                pooled: Tensor = h[:, 0]
            case Pooling.MEAN:
                pooled = h.mean(1)
        return self.cls(pooled)


knobs: TrainKnobs = TrainKnobs()
model: ClauseEncoder = ClauseEncoder(Pooling.CLS).cuda()
opt: torch.optim.AdamW = torch.optim.AdamW(model.parameters(), lr=5e-4, capturable=True)
sched: torch.optim.lr_scheduler.LambdaLR = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / knobs.warmup_steps))


@torch.compile(mode="reduce-overhead")
def loss_step(ids: Tensor, mask: Tensor, y: Tensor) -> Tensor:
    t0: float = time.perf_counter()  # HAZARD: host-code
    logits: Tensor = model(ids, mask)
    smooth: float = knobs.label_smoothing  # HAZARD: python-scalar
    loss: Tensor = nn.functional.cross_entropy(logits, y, label_smoothing=smooth)
    knobs.timings.append(t0)
    return loss


@torch.compile(mode="reduce-overhead")
def opt_step() -> None:
    opt.step()


@torch.compile(mode="reduce-overhead")
def classify(ids: Tensor, mask: Tensor) -> Tensor:
    return model(ids, mask).softmax(-1)


def pad(batch: list[list[int]], width: int = MAX_LEN) -> tuple[Tensor, Tensor]:
    ids: Tensor = torch.zeros(len(batch), width, dtype=torch.long)
    for i, row in enumerate(batch):
        ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)  # CLEAN: host-side padding before any compiled call
    return ids.cuda(), (ids != 0).cuda()


def train(tok: Tokenizer, corpus: list[tuple[str, int]]) -> None:
    for step in range(0, len(corpus) - 32, 32):
        chunk = corpus[step : step + 32]
        ids, mask = pad([tok.encode(t) for t, _ in chunk])  # CLEAN: every batch padded to the Final MAX_LEN
        y: Tensor = torch.tensor([c for _, c in chunk], device="cuda")  # CLEAN: eager upload outside the compiled functions
        knobs.label_smoothing = 0.1 if step > 3200 else 0.0
        loss: Tensor = loss_step(ids, mask, y)
        loss.backward()
        opt_step()
        sched.step()  # HAZARD: optimizer
        opt.zero_grad(set_to_none=False)


def serve(tok: Tokenizer, clauses: list[str]) -> list[int]:
    preds: list[int] = []
    with torch.no_grad():
        for text in clauses:
            toks: list[int] = tok.encode(text)
            ids, mask = pad([toks], width=len(toks))
            if (p := classify(ids, mask)).max() > 0.0:  # HAZARD: dynamic-shape
                preds.append(int(p.argmax()))  # CLEAN: host read outside the compiled function
    return preds


if __name__ == "__main__":
    corpus: list[tuple[str, int]] = [(f"the licensee shall indemnify party {i}", i % N_CLAUSES) for i in range(6400)]
    train(HashTokenizer(), corpus)
    print(serve(HashTokenizer(), ["governing law of new york", "term and termination upon notice of thirty days"]))
