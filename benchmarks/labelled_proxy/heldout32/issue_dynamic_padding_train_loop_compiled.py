# reduce-overhead in an HF-style training loop with per-batch dynamic padding
# (pytorch#188150): the 1.5x speed-up from a fixed-shape microbenchmark turns
# into ~0x, with
#   "CUDAGraph supports dynamic shapes by recording a new graph for each
#    distinct input size ... We have observed 9 distinct sizes."
# plus a recompile per step from the LR schedule. Toy encoder, torch 2.11 / H200.
import logging
import os
import random

import torch
import torch._inductor.config
import torch.nn as nn
import torch.nn.functional as F

os.environ.setdefault("TORCH_LOGS", "cudagraphs,recompiles")
torch._inductor.config.triton.cudagraph_dynamic_shape_warn_limit = 4
log = logging.getLogger("train")
VOCAB, D, MAX_LEN, PAD = 30522, 256, 512, 0


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D, padding_idx=PAD)
        self.ff = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))
        self.cls = nn.Linear(D, 2)

    def forward(self, ids, mask):
        h = self.emb(ids)
        h = h + self.ff(h)
        h = h.masked_fill(~mask.unsqueeze(-1), 0.0)  # CLEAN: masked_fill, no data-dependent shape
        return self.cls(h.sum(1) / mask.sum(1, keepdim=True).clamp(min=1))


@torch.compile(mode="reduce-overhead")
def weighted_loss(logits, labels, mask):
    n_tok = int(mask.sum())  # HAZARD: host-sync
    log.info("tokens in batch: %s", mask.sum())  # HAZARD: host-code
    return F.cross_entropy(logits, labels) * (n_tok / (mask.shape[0] * MAX_LEN))


def collate(lengths, pad_to=None):
    L = pad_to or max(lengths)
    ids = torch.full((len(lengths), L), PAD, dtype=torch.long)
    for i, n in enumerate(lengths):
        ids[i, :n] = torch.randint(1, VOCAB, (n,))
    return ids.cuda(), (ids != PAD).cuda(), torch.randint(0, 2, (len(lengths),)).cuda()  # CLEAN: H2D copies in the data pipeline, outside compiled code


model = Encoder().cuda()
cmodel = torch.compile(model, mode="reduce-overhead")
opt = torch.optim.AdamW(model.parameters(), lr=5e-5)
sched = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1.0, end_factor=0.1, total_iters=200)
opt_step = torch.compile(opt.step, mode="reduce-overhead")

for step in range(200):
    ids, mask, labels = collate([random.randint(16, MAX_LEN) for _ in range(16)])  # pad to longest
    logits = cmodel(ids, mask)  # HAZARD: dynamic-shape
    loss = weighted_loss(logits, labels, mask)  # HAZARD: dynamic-shape
    loss.backward()
    opt_step()
    opt.zero_grad(set_to_none=True)
    sched.step()  # HAZARD: optimizer

# the workaround from the thread: pad everything to max_length
eval_model = torch.compile(model, mode="max-autotune-no-cudagraphs")
with torch.no_grad():
    for _ in range(10):
        ids, mask, labels = collate([random.randint(16, MAX_LEN) for _ in range(16)], pad_to=MAX_LEN)
        acc = (cmodel(ids, mask).argmax(-1) == labels).float().mean()  # CLEAN: padded to MAX_LEN, one shape
        ref = eval_model(ids, mask)  # CLEAN: no-cudagraphs build, any shape is fine
        print("acc", acc.item(), "ref max", ref.abs().max().item())
