from dataclasses import dataclass
from typing import List

import torch

BLANK_ID = 0


@dataclass
class CTCBatch:
    log_probs: torch.Tensor  # (B, T, V) on cuda
    lengths: torch.Tensor    # (B,) int64 on cuda


def collapse_repeats(ids: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
    ids = ids[:length]  # HAZARD: dynamic-shape
    ids = torch.unique_consecutive(ids)  # HAZARD: dynamic-shape
    return ids[ids != BLANK_ID]  # HAZARD: dynamic-shape


class GraphedCTCDecoder:
    def __init__(self, max_batch: int, max_frames: int, vocab: int) -> None:
        self.max_batch = max_batch
        self.log_probs = torch.full((max_batch, max_frames, vocab), -1e4, device="cuda")
        self.lengths = torch.zeros(max_batch, dtype=torch.long, device="cuda")
        self.graph = torch.cuda.CUDAGraph()
        self.hyps: List[torch.Tensor] = []

    def _decode(self) -> List[torch.Tensor]:
        best = self.log_probs.argmax(-1)
        hyps = []
        b = 0
        while b < self.max_batch and self.lengths[b] > 0:  # HAZARD: dynamic-control-flow
            hyps.append(collapse_repeats(best[b], self.lengths[b]))
            b += 1
        return hyps

    def capture(self) -> None:
        stream = torch.cuda.Stream()
        with torch.cuda.graph(self.graph, stream=stream):  # HAZARD: api-misuse
            self.hyps = self._decode()

    def __call__(self, batch: CTCBatch) -> List[List[int]]:
        B, T, V = batch.log_probs.shape
        if B > self.max_batch or T > self.log_probs.shape[1]:  # CLEAN: int comparisons on Python shapes
            raise ValueError(f"batch {B}x{T} exceeds graph capacity {tuple(self.log_probs.shape)}")  # CLEAN: f-string of ints in a raise message
        self.log_probs.fill_(-1e4)
        self.lengths.zero_()
        self.log_probs[:B, :T].copy_(batch.log_probs)
        self.lengths[:B].copy_(batch.lengths)
        self.graph.replay()
        return [h.tolist() for h in self.hyps]  # CLEAN: .tolist() on the host after replay


def decode_eager(batch: CTCBatch) -> List[List[int]]:
    best = batch.log_probs.argmax(-1)
    return [collapse_repeats(best[i], batch.lengths[i]).tolist() for i in range(best.shape[0])]  # CLEAN: eager reference decoder, never called under capture


if __name__ == "__main__":
    dec = GraphedCTCDecoder(max_batch=8, max_frames=400, vocab=128)
    dec.capture()
    lp = torch.randn(4, 300, 128, device="cuda").log_softmax(-1)
    print(dec(CTCBatch(lp, torch.tensor([300, 280, 150, 90], device="cuda"))))
