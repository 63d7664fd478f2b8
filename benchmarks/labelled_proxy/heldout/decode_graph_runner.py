"""Decode-step CUDA graph runner: one graph per padded batch size, one shared pool."""
import bisect
import logging
from dataclasses import dataclass

import torch
from torch import nn

logger = logging.getLogger(__name__)

CAPTURE_SIZES = [1, 2, 4, 8, 16, 24, 32]


@dataclass
class DecodeMeta:
    batch_size: int
    padded_size: int
    positions: torch.Tensor
    seq_lens: torch.Tensor


class TinyDecoder(nn.Module):
    def __init__(self, vocab: int = 32000, hidden: int = 1024):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.rope_scale = nn.Parameter(torch.ones(hidden), requires_grad=False)
        self.proj = nn.Linear(hidden, hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, input_ids, positions, seq_lens):
        h = self.embed(input_ids) + positions.unsqueeze(-1).float() * self.rope_scale
        longest = int(seq_lens.max())  # HAZARD: host-sync
        h = torch.tanh(self.proj(h)) / longest
        return self.lm_head(h)


class GraphRunner:
    def __init__(self, model: nn.Module, max_bs: int = 32, device: str = "cuda"):
        self.model = model
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.outputs: dict[int, torch.Tensor] = {}
        self.sampled: dict[int, torch.Tensor] = {}
        self.sample_gen = torch.Generator(device=device)
        self.pool = None
        self.input_ids = torch.zeros(max_bs, dtype=torch.long, device=device)
        self.positions = torch.zeros(max_bs, dtype=torch.long, device=device)
        self.seq_lens = torch.ones(max_bs, dtype=torch.int32, device=device)

    @torch.inference_mode()
    def capture(self, num_warmup: int = 2) -> None:
        stream = torch.cuda.Stream()
        for bs in reversed(CAPTURE_SIZES):
            ids, pos, lens = self.input_ids[:bs], self.positions[:bs], self.seq_lens[:bs]
            with torch.cuda.stream(stream):
                for _ in range(num_warmup):
                    self.model(ids, pos, lens)
            stream.synchronize()  # CLEAN: stream sync between warm-up and capture, outside the region
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool, stream=stream):
                logger.debug("capturing decode graph bs=%d", bs)  # CLEAN: logging once during manual capture
                out = self.model(ids, pos, lens)
                self.sampled[bs] = torch.multinomial(out.softmax(-1), 1, generator=self.sample_gen)  # HAZARD: rng
            if self.pool is None:
                self.pool = g.pool()
            self.graphs[bs] = g
            self.outputs[bs] = out  # CLEAN: static output stored once per captured graph

    def meta_for(self, input_ids: torch.Tensor, positions, seq_lens) -> DecodeMeta:
        raw_bs = input_ids.shape[0]
        idx = bisect.bisect_left(CAPTURE_SIZES, raw_bs)
        padded = CAPTURE_SIZES[idx] if idx < len(CAPTURE_SIZES) else -1
        return DecodeMeta(raw_bs, padded, positions, seq_lens)

    @torch.inference_mode()
    def run(self, input_ids, positions, seq_lens):
        meta = self.meta_for(input_ids, positions, seq_lens)
        if meta.padded_size == -1:  # CLEAN: int comparison on host-side metadata
            return self.model(input_ids, positions, seq_lens)
        n = meta.batch_size
        self.input_ids[:n].copy_(input_ids)
        self.positions = meta.positions  # HAZARD: static-address
        self.seq_lens[:n].copy_(meta.seq_lens)
        self.graphs[meta.padded_size].replay()
        return self.outputs[meta.padded_size][:n]


def greedy_decode(runner: GraphRunner, prompt_last: torch.Tensor, start_pos: torch.Tensor, steps: int):
    ids = prompt_last
    pos = start_pos.clone()
    lens = (start_pos + 1).to(torch.int32)
    produced = []
    for _ in range(steps):
        logits = runner.run(ids, pos, lens)
        ids = logits.argmax(-1)
        produced.append(ids)  # CLEAN: argmax result is a fresh tensor, not the graph's static output
        pos += 1
        lens += 1
    return torch.stack(produced, dim=1)


if __name__ == "__main__":
    model = TinyDecoder().cuda().eval()
    runner = GraphRunner(model)
    runner.capture()
    batch = torch.randint(0, 32000, (5,), device="cuda")
    out = greedy_decode(runner, batch, torch.full((5,), 7, device="cuda"), steps=16)
    print(out.shape)
