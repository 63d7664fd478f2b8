"""Decode-only graph runner for a small decoder, modelled on an inference-engine worker.

Graphs are captured largest batch first into one shared pool in `capture_all()` and
replayed later from `execute()`, after the live batch has been padded to a bucket.
"""
import bisect
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

logger = logging.getLogger("worker.graphs")


class TinyDecoder(nn.Module):
    def __init__(self, vocab=32000, dim=1024, max_pos=4096):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_pos, dim)
        self.proj = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, input_ids, positions, seq_lens):
        if input_ids.dim() == 1:
            input_ids = input_ids.unsqueeze(-1)
        if (positions >= self.pos.num_embeddings).any():  # HAZARD: dynamic-control-flow
            positions = positions.clamp(max=self.pos.num_embeddings - 1)
        h = self.embed(input_ids).squeeze(1) + self.pos(positions)
        h = F.silu(self.proj(h))
        longest = int(seq_lens.max())  # HAZARD: host-sync
        h = h * (seq_lens.clamp(max=longest).to(h.dtype) / 4096.0).unsqueeze(-1)
        return self.head(h)


class DecodeGraphRunner:
    def __init__(self, model, max_bs=64, device="cuda"):
        self.model = model
        self.capture_sizes = [1, 2, 4, 8, 16, 32, 64]
        self.graphs = {}
        self.outputs = {}
        self.pool = None
        self.stream = torch.cuda.Stream()
        self.buffers = {
            "input_ids": torch.zeros(max_bs, dtype=torch.long, device=device),
            "positions": torch.zeros(max_bs, dtype=torch.long, device=device),
            "seq_lens": torch.ones(max_bs, dtype=torch.int32, device=device),
        }
        self.recent_logits = []

    def _run(self, bs):
        b = self.buffers
        return self.model(b["input_ids"][:bs], b["positions"][:bs], b["seq_lens"][:bs])

    @torch.inference_mode()
    def capture_all(self):
        for bs in reversed(self.capture_sizes):
            self.stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.stream):
                for _ in range(2):
                    self._run(bs)
            torch.cuda.current_stream().wait_stream(self.stream)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool, stream=self.stream):  # CLEAN: dedicated side stream shared by warm-up and capture
                logger.info("capturing decode graph bs=%d", bs)  # CLEAN: plain string logged once at capture time
                out = self._run(bs)
            if self.pool is None:
                self.pool = g.pool()
            self.graphs[bs] = g
            self.outputs[bs] = out

    @torch.inference_mode()
    def execute(self, input_ids, positions, seq_lens):
        n = input_ids.shape[0]
        if n > self.capture_sizes[-1]:
            return self.model(input_ids, positions, seq_lens).argmax(-1).tolist()
        bs = self.capture_sizes[bisect.bisect_left(self.capture_sizes, n)]
        self.buffers["input_ids"][:n].copy_(input_ids)  # CLEAN: static input refreshed in place
        self.buffers["positions"] = positions  # HAZARD: static-address
        self.buffers["seq_lens"][:n].copy_(seq_lens)
        self.graphs[bs].replay()
        logits = self.outputs[bs][:n]
        self.recent_logits.append(logits)  # HAZARD: static-address
        return logits.argmax(-1).tolist()


def serve(model, batches):
    runner = DecodeGraphRunner(model.cuda().eval())
    with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        runner.capture_all()
    for ids, pos, lens in batches:
        yield runner.execute(ids.cuda(), pos.cuda(), lens.cuda())
