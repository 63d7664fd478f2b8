"""Paged-attention runner: attention metadata is built inside the captured region."""
from dataclasses import dataclass

import torch
import torch.nn as nn


@dataclass
class AttnMetadata:
    seq_lens: torch.Tensor
    cu_seqlens: torch.Tensor
    max_seq_len: int
    block_tables: torch.Tensor

    @classmethod
    def build(cls, seq_lens, block_tables, block_size=16):
        cu = torch.zeros(seq_lens.numel() + 1, dtype=torch.int32, device=seq_lens.device)
        cu[1:] = seq_lens.cumsum(0)
        max_len = int(seq_lens.max())  # HAZARD: host-sync
        n_blocks = (max_len + block_size - 1) // block_size
        return cls(seq_lens, cu, max_len, block_tables[:, :n_blocks])


class PagedDecoder(nn.Module):
    def __init__(self, vocab=32000, dim=2048):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.proj = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids, meta: AttnMetadata):
        h = self.embed(ids)
        scale = meta.seq_lens.float().clamp(min=1).rsqrt()[:, None]
        ctx = h[: meta.cu_seqlens[-1]]  # HAZARD: dynamic-shape
        h = h + self.proj(ctx) * scale
        return self.head(h)


class CudaGraphRunner:
    def __init__(self, model, max_bs=32, max_blocks=256):
        self.model = model
        self.ids = torch.zeros(max_bs, dtype=torch.long, device="cuda")
        self.seq_lens = torch.ones(max_bs, dtype=torch.int32, device="cuda")
        self.block_tables = torch.zeros(max_bs, max_blocks, dtype=torch.int32, device="cuda")
        self.stream = torch.cuda.Stream()
        self.graph = None
        self.out = None

    def capture(self):
        with torch.cuda.stream(self.stream):
            for _ in range(2):
                self.model(self.ids, AttnMetadata.build(self.seq_lens, self.block_tables))
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=self.stream):
            meta = AttnMetadata.build(self.seq_lens, self.block_tables)
            self.out = self.model(self.ids, meta)  # CLEAN: runner keeps its static output on self once

    def step(self, ids, seq_lens):
        if self.graph is None:  # CLEAN: lazy capture on first use
            self.capture()
        self.ids.copy_(ids)
        self.seq_lens.copy_(seq_lens)
        self.graph.replay()
        return self.out.argmax(-1)
