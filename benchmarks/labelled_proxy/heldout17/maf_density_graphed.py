"""Masked autoregressive flow (MAF) density model for tabular transaction features.

The flow is trained by maximum likelihood; low log-density rows are flagged for review.
The whole flow is one module graphed with torch.cuda.make_graphed_callables.
"""
import math
import time

import numpy as np
import torch
import torch.nn as nn


class MaskedLinear(nn.Linear):
    def __init__(self, inp, out, mask):
        super().__init__(inp, out)
        self.register_buffer("mask", mask)

    def forward(self, x):
        return nn.functional.linear(x, self.weight * self.mask, self.bias)


class MADE(nn.Module):
    def __init__(self, dim, hidden=256):
        super().__init__()
        deg_in = torch.arange(1, dim + 1)
        deg_h = torch.arange(hidden) % max(dim - 1, 1) + 1
        m1 = (deg_h[:, None] >= deg_in[None]).float()
        m2 = (deg_h[None, :] < deg_in[:, None]).float().repeat(2, 1)
        self.net = nn.Sequential(MaskedLinear(dim, hidden, m1), nn.ReLU(), MaskedLinear(hidden, 2 * dim, m2))

    def forward(self, x):
        return self.net(x).chunk(2, -1)


class MAF(nn.Module):
    def __init__(self, dim, n_blocks, col_means, col_stds):
        super().__init__()
        self.blocks = nn.ModuleList(MADE(dim) for _ in range(n_blocks))
        self.col_means = col_means.astype(np.float32)
        self.register_buffer("col_std", torch.from_numpy(col_stds.astype(np.float32)))  # CLEAN: moved to the GPU once with the module
        self.fwd_stamps = []

    def forward(self, x):
        self.fwd_stamps.append(time.perf_counter())  # HAZARD: host-code
        x = (x - torch.from_numpy(self.col_means).cuda()) / self.col_std  # HAZARD: pinned-memory
        log_det = torch.zeros(x.shape[0], device=x.device)
        for blk in self.blocks:
            mu, alpha = blk(x)
            alpha = alpha.clamp(-5.0, 5.0)  # CLEAN: clamp keeps everything on the device
            x = (x - mu) * torch.exp(-alpha)
            log_det = log_det - alpha.sum(-1)
            x = x.flip(-1)
        if torch.isnan(log_det).any():  # HAZARD: dynamic-control-flow
            log_det = torch.nan_to_num(log_det, nan=-1e4)
        return -0.5 * (x.pow(2) + math.log(2 * math.pi)).sum(-1) + log_det


def grad_monitor(module, grad_in, grad_out):
    module.last_grad_norm = grad_out[0].norm()


def train(flow, loader, dim, batch=1024, epochs=50):
    flow = flow.cuda()
    flow.register_full_backward_hook(grad_monitor)  # HAZARD: api-misuse
    opt = torch.optim.Adam(flow.parameters(), lr=1e-4, weight_decay=1e-6)
    sample = torch.randn(batch, dim, device="cuda")
    flow = torch.cuda.make_graphed_callables(flow, (sample,))
    flow.register_forward_hook(lambda m, i, o: None)  # CLEAN: hook registered after graphing
    static_x = torch.zeros(batch, dim, device="cuda")
    for epoch in range(epochs):
        for x in loader:
            static_x.copy_(x, non_blocking=True)  # CLEAN: copy into a fixed-shape input
            nll = -flow(static_x).mean()
            opt.zero_grad(set_to_none=True)
            nll.backward()
            opt.step()
    return flow


@torch.no_grad()
def flag_outliers(flow, table, quantile=0.001):
    flow.eval()
    logp = torch.cat([flow(chunk.cuda()) for chunk in table.split(8192)])
    logp = torch.where(torch.isfinite(logp), logp, torch.full_like(logp, -1e4))
    cutoff = torch.quantile(logp, quantile)
    return (logp < cutoff).nonzero().squeeze(1).cpu()  # CLEAN: eager post-processing, outside any graph
