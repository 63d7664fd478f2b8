"""Near-duplicate detection for a web crawler's indexing pipeline.

Pages are reduced to hashed word 5-gram shingles; a learned hasher maps them
to 256-bit codes, which are matched (Hamming distance) against the codes of the
current index shard.  The hot functions go through a reduce-overhead wrapper.
"""
import functools
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("crawl.dedup")
rcompile = functools.partial(torch.compile, mode="reduce-overhead")
N_BUCKETS, MAX_SHINGLES, BITS, PAD_BATCH = 1 << 20, 512, 256, 1024


class ShingleHasher(nn.Module):
    def __init__(self, d=384):
        super().__init__()
        self.bag = nn.EmbeddingBag(N_BUCKETS, d, mode="mean", padding_idx=0)
        self.mlp = nn.Sequential(nn.Linear(d, 512), nn.GELU(), nn.Linear(512, BITS))

    def forward(self, shingles):
        return self.mlp(self.bag(shingles))


@rcompile
def hash_pages(model, shingles):
    return torch.where(model(shingles) > 0, 1.0, -1.0).half()


@rcompile
def match(codes, shard_codes):
    log.info("matching %d pages against the shard", codes.shape[0])  # HAZARD: host-code
    sim = codes @ shard_codes.T
    best = sim.max(dim=-1)
    if best.values.min() >= BITS - 2 * 3:  # HAZARD: dynamic-control-flow
        return best.values, best.indices.unsqueeze(-1).expand(-1, 5)
    top = sim.topk(5, dim=-1)  # CLEAN: fixed-k candidates, no data-dependent shape
    return top.values[:, 0], top.indices


def _precision(pred_dup, true_dup):
    return ((pred_dup & true_dup).sum() / pred_dup.sum().clamp(min=1)).item()  # CLEAN: default torch.compile


precision = torch.compile(_precision)


@torch.inference_mode()
def dedup_stream(model, shard_codes, fetched, max_hamming=3):
    fresh_codes, verdicts = [], []
    for shingles in fetched:
        codes = hash_pages(model, shingles)  # HAZARD: dynamic-shape
        fresh_codes.append(codes)  # HAZARD: static-address
        best = (codes @ shard_codes.T).amax(-1)
        verdicts.append((BITS - best.float()) / 2 <= max_hamming)
    return fresh_codes, verdicts


@torch.inference_mode()
def dedup_padded(model, shard_codes, fetched, max_hamming=3):
    kept = []
    for shingles in fetched:
        n = shingles.shape[0]
        padded = F.pad(shingles, (0, 0, 0, PAD_BATCH - n))
        codes = hash_pages(model, padded)[:n].clone()  # CLEAN: padded to PAD_BATCH and cloned
        best, _ = match(F.pad(codes, (0, 0, 0, PAD_BATCH - n)), shard_codes)
        is_dup = ((BITS - best[:n].float()) / 2 <= max_hamming).clone()
        kept.append(codes[~is_dup])
    return torch.cat(kept)


if __name__ == "__main__":
    model = ShingleHasher().cuda().eval()
    shard = torch.where(torch.randn(100_000, BITS, device="cuda") > 0, 1.0, -1.0).half()
    batches = [torch.randint(0, N_BUCKETS, (int(n), MAX_SHINGLES), device="cuda") for n in (37, 512, 900, 128)]
    new_codes = dedup_padded(model, shard, batches)
    dedup_stream(model, shard, batches)
    labels = torch.rand(1000, device="cuda") > 0.9
    print(new_codes.shape, precision(labels, labels))
