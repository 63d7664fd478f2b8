"""Text-embedding inference server: one CUDA graph per (batch, seq) bucket.

Requests are tokenized on the CPU by the HTTP workers, padded up to the nearest
bucket and copied into that bucket's static buffers; the encoder, mean pooling and
the Matryoshka truncation then run as a single graph replay. All buckets share one
memory pool and are captured largest first.
"""
import bisect
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("embedding_server")

BATCH_BUCKETS = (1, 4, 8, 16, 32)
SEQ_BUCKETS = (32, 64, 128, 256)


class EmbeddingEngine:
    def __init__(self, encoder: nn.Module, instruction_ids, dim=768):
        self.encoder = encoder.cuda().eval()
        self.dim = dim
        self.output_dim = dim  # Matryoshka size, changed at runtime from the admin API
        self.instruction_cpu = torch.tensor(instruction_ids, dtype=torch.long)
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.static_in, self.static_out = {}, {}, {}

    # -- admin API ---------------------------------------------------------------
    def set_output_dim(self, k: int):
        self.output_dim = int(k)

    def set_instruction(self, ids):
        self.instruction_cpu = torch.tensor(ids, dtype=torch.long)

    # -- graph body ----------------------------------------------------------------
    def _forward(self, ids, mask):
        prefix = self.instruction_cpu.to(ids.device, non_blocking=True)  # HAZARD: pinned-memory
        bsz = ids.size(0)
        ids = torch.cat([prefix.expand(bsz, -1), ids], dim=1)
        mask = torch.cat([mask.new_ones(bsz, prefix.numel()), mask], dim=1)
        longest = int(mask.sum(dim=1).max())  # HAZARD: host-sync
        hidden = self.encoder(ids[:, :longest], mask[:, :longest])  # [B, T, dim] token states
        m = mask[:, :longest].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)
        k = self.output_dim  # HAZARD: python-scalar
        emb = F.normalize(pooled[:, :k], dim=-1)
        return F.pad(emb, (0, self.dim - k))

    @torch.no_grad()
    def capture_all(self):
        side = torch.cuda.Stream()
        for bs in reversed(BATCH_BUCKETS):
            for sl in reversed(SEQ_BUCKETS):
                ids = torch.zeros(bs, sl, dtype=torch.long, device="cuda")
                mask = torch.ones(bs, sl, dtype=torch.long, device="cuda")
                with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
                    side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(side):
                        for _ in range(3):
                            self._forward(ids, mask)
                    torch.cuda.current_stream().wait_stream(side)
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g, pool=self.pool):
                        out = self._forward(ids, mask)
                self.graphs[(bs, sl)] = g
                self.static_in[(bs, sl)] = (ids, mask)
                self.static_out[(bs, sl)] = out
                log.info("captured bucket bs=%d seq=%d", bs, sl)

    def _bucket(self, n, length):
        bs = BATCH_BUCKETS[min(bisect.bisect_left(BATCH_BUCKETS, n), len(BATCH_BUCKETS) - 1)]
        sl = SEQ_BUCKETS[min(bisect.bisect_left(SEQ_BUCKETS, length), len(SEQ_BUCKETS) - 1)]
        return bs, sl

    @torch.no_grad()
    def embed(self, ids_cpu, mask_cpu):
        n, length = ids_cpu.shape
        key = self._bucket(n, length)
        length = min(length, key[1])
        ids, mask = self.static_in[key]
        ids.zero_()
        mask.zero_()
        ids[:n, :length].copy_(ids_cpu[:, :length], non_blocking=True)  # CLEAN: copy_ into the static input
        mask[:n, :length].copy_(mask_cpu[:, :length], non_blocking=True)
        self.graphs[key].replay()
        return self.static_out[key][:n].float().cpu()  # CLEAN: read back right after the replay

    @torch.no_grad()
    def embed_pretokenized(self, ids_gpu, mask_gpu):
        """Fast path for the batch API, where the gateway already holds CUDA tensors."""
        key = (ids_gpu.size(0), ids_gpu.size(1))
        self.static_in[key] = (ids_gpu, mask_gpu)  # HAZARD: static-address
        self.graphs[key].replay()
        return self.static_out[key].clone()  # CLEAN: cloned before the next request replays


def health_check(engine: EmbeddingEngine):
    ids = torch.randint(5, 1000, (2, 12))
    out = engine.embed(ids, torch.ones_like(ids))
    ok = bool(torch.isfinite(out).all())
    log.info("health check: %s", "ok" if ok else "non-finite embeddings")
    return ok
