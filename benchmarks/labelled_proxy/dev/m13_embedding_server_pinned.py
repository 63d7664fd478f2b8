"""Embedding server: graphs captured per batch size with host-side metadata staging."""
import numpy as np
import torch
import torch.nn as nn


class MeanPoolEncoder(nn.Module):
    def __init__(self, vocab=50000, dim=768):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.proj = nn.Linear(dim, dim)

    def forward(self, flat_ids, offsets):
        return nn.functional.normalize(self.proj(self.emb(flat_ids, offsets)), dim=-1)


class EmbeddingGraphs:
    def __init__(self, model, batch_sizes=(64, 32, 16, 8), tokens_per_row=128):
        self.model = model
        self.batch_sizes = sorted(batch_sizes, reverse=True)
        self.tpr = tokens_per_row
        self.host_ids = torch.zeros(max(batch_sizes) * tokens_per_row, dtype=torch.long).pin_memory()  # CLEAN: pinned staging buffer allocated once, outside capture
        self.graphs, self.bufs = {}, {}

    def capture_all(self):
        pool = torch.cuda.graph_pool_handle()
        side = torch.cuda.Stream()
        for bs in self.batch_sizes:
            ids = torch.zeros(bs * self.tpr, dtype=torch.long, device="cuda")
            offsets_np = np.arange(bs, dtype=np.int64) * self.tpr
            with torch.cuda.stream(side):
                self.model(ids, torch.from_numpy(offsets_np).cuda())
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool, stream=side):
                offsets = torch.from_numpy(offsets_np).to("cuda", non_blocking=True)  # HAZARD: pinned-memory
                lens = torch.tensor([self.tpr] * bs, device="cuda")  # HAZARD: pinned-memory
                scratch = torch.empty(bs, dtype=torch.float32, pin_memory=True)  # HAZARD: pinned-memory
                zeros = torch.zeros(bs, self.tpr, device="cuda")  # CLEAN: device-side allocation, no host copy
                out = self.model(ids, offsets)
            self.graphs[bs] = g
            self.bufs[bs] = (ids, out, lens, scratch, zeros)

    @torch.inference_mode()
    def embed(self, id_rows):
        n = len(id_rows)
        bs = min(b for b in self.batch_sizes if b >= n)
        flat = torch.as_tensor(np.concatenate(id_rows)[: n * self.tpr])
        self.host_ids[: flat.numel()].copy_(flat)
        ids, out, *_ = self.bufs[bs]
        ids[: flat.numel()].copy_(self.host_ids[: flat.numel()], non_blocking=True)  # CLEAN: pinned H2D copy before replay, outside capture
        self.graphs[bs].replay()
        return out[:n].cpu()  # CLEAN: D2H read after replay
