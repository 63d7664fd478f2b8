"""Metagenomic read classifier: a selective state-space (Mamba-like) encoder over one-hot DNA.

The scan is a chunked log-space parallel scan; `classify` is compiled with
inductor CUDA graphs and is called both for padded batches and for single reads.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def chunked_scan(u, delta, A, B, C, chunk=128):
    b, d, L = u.shape
    state = u.new_zeros(b, d, A.shape[1])
    ys = []
    for s in range(0, L, chunk):  # CLEAN: loop bounds come from shape metadata, fixed per compiled shape
        dl = delta[:, :, s:s + chunk, None] * A[None, :, None, :]
        log_cum = torch.cumsum(dl, dim=2)
        dBu = (delta[:, :, s:s + chunk] * u[:, :, s:s + chunk])[..., None] * B[:, None, s:s + chunk, :]
        x = torch.exp(log_cum) * (state[:, :, None] + torch.cumsum(dBu * torch.exp(-log_cum), dim=2))
        ys.append((x * C[:, None, s:s + chunk, :]).sum(-1))
        state = x[:, :, -1]
    return torch.cat(ys, -1)


class SSMBlock(nn.Module):
    def __init__(self, dim=128, d_state=16, dt_max=0.1):
        super().__init__()
        self.inp = nn.Linear(dim, 2 * dim)
        self.bc = nn.Linear(dim, 2 * d_state)
        self.dt = nn.Linear(dim, dim)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1).float()).repeat(dim, 1))
        self.D = nn.Parameter(torch.ones(dim))
        self.out = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.dt_max = dt_max

    def forward(self, h):
        x, z = self.inp(self.norm(h)).chunk(2, -1)
        B, C = self.bc(x).chunk(2, -1)
        dt = F.softplus(self.dt(x)).clamp(max=self.dt_max)  # CLEAN: dt_max is a constant fixed at construction
        y = chunked_scan(x.transpose(1, 2), dt.transpose(1, 2), -torch.exp(self.A_log), B, C)
        y = y.transpose(1, 2) + self.D * x
        return h + self.out(y * F.silu(z))


class ReadEncoder(nn.Module):
    def __init__(self, n_taxa=1000, dim=128, depth=4):
        super().__init__()
        self.embed = nn.Linear(4, dim)
        self.blocks = nn.Sequential(*[SSMBlock(dim) for _ in range(depth)])
        self.head = nn.Linear(dim, n_taxa)
        self.last_call_t = 0.0

    def forward(self, onehot):
        return self.blocks(self.embed(onehot))


@torch.compile(options={"triton.cudagraphs": True}, dynamic=False)
def classify(model, onehot, pad_mask):
    model.last_call_t = time.perf_counter()  # HAZARD: host-code
    onehot.mul_(pad_mask.unsqueeze(-1))  # HAZARD: static-address
    h = model(onehot)
    pooled = (h * pad_mask.unsqueeze(-1)).sum(1) / pad_mask.sum(1, keepdim=True).clamp_min(1.0)
    logits = model.head(pooled)
    top = logits.argmax(-1).tolist()  # HAZARD: host-sync
    return logits, top


@torch.no_grad()
def classify_bucketed(model, reads, L=1024, B=64):
    batch = torch.zeros(B, L, 4, device="cuda")
    mask = torch.zeros(B, L, device="cuda")
    for i, r in enumerate(reads[:B]):
        n = min(L, r.shape[0])
        batch[i, :n] = r[:n]
        mask[i, :n] = 1.0
    logits, top = classify(model, batch, mask)  # CLEAN: every batch is padded to the same (B, L) shape
    return logits[: len(reads)].clone(), top[: len(reads)]


@torch.no_grad()
def classify_one_by_one(model, reads):
    out = []
    for r in reads:
        r = r.cuda(non_blocking=True)
        logits, top = classify(model, r[None].clone(), torch.ones(1, r.shape[0], device="cuda"))  # HAZARD: dynamic-shape
        out.append(top[0])
    return out
