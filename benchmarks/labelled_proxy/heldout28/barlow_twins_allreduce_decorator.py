"""Barlow Twins self-supervised pre-training on 32 GPUs: the cross-correlation matrix is summed
across ranks with all_reduce, as in the reference implementation. The train step is wrapped
by a capture-on-first-call decorator."""
import functools

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn


def graphed_on_first_call(fn):
    state = {}

    @functools.wraps(fn)
    def wrapper(self, *args):
        if "graph" not in state:
            state["static"] = [a.clone() for a in args]
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):  # HAZARD: api-misuse
                state["out"] = fn(self, *state["static"])
            state["graph"] = g
        for s, a in zip(state["static"], args):
            s.copy_(a)  # CLEAN: refill the captured inputs in place
        state["graph"].replay()
        return state["out"]

    return wrapper


def off_diagonal(c):
    n = c.shape[0]
    return c.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()  # CLEAN: fixed-shape off-diagonal view, no mask indexing


class GPUColorJitter(nn.Module):
    def __init__(self, params_path):
        super().__init__()
        self.params_np = np.load(params_path).astype(np.float32)  # (4,) brightness/contrast/saturation/hue

    def forward(self, x):
        p = torch.from_numpy(self.params_np).cuda()  # HAZARD: pinned-memory
        scale = 1 + (torch.rand(x.shape[0], 1, 1, 1, device=x.device) * 2 - 1) * p[0]
        return (x * scale).clamp(0, 1)


class BarlowTwins(nn.Module):
    def __init__(self, backbone, proj_dim=8192, lambd=0.0051, strict_offdiag=False):
        super().__init__()
        self.backbone, self.lambd, self.strict = backbone, lambd, strict_offdiag
        self.proj = nn.Sequential(nn.Linear(2048, proj_dim), nn.BatchNorm1d(proj_dim), nn.ReLU(), nn.Linear(proj_dim, proj_dim))
        self.bn = nn.BatchNorm1d(proj_dim, affine=False)
        self.jitter = GPUColorJitter("jitter_params.npy")
        self.eye = None

    def loss(self, y1, y2, global_batch):
        z1 = self.proj(self.backbone(self.jitter(y1)))
        z2 = self.proj(self.backbone(self.jitter(y2)))
        c = self.bn(z1).T @ self.bn(z2)
        c.div_(global_batch)
        dist.all_reduce(c)
        on = torch.diagonal(c).add_(-1).pow_(2).sum()
        lam = self.lambd  # HAZARD: python-scalar
        if self.strict:
            if self.eye is None:
                self.eye = torch.eye(c.shape[0], dtype=torch.bool, device=c.device)
            off = c[~self.eye].pow_(2).sum()  # HAZARD: dynamic-shape
        else:
            off = off_diagonal(c).pow_(2).sum()
        return on + lam * off


class Trainer:
    def __init__(self, model, batch_per_gpu=64):
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, weight_decay=1.5e-6)  # CLEAN: SGD keeps no host-side step state
        self.global_batch = batch_per_gpu * dist.get_world_size()  # CLEAN: world size fixed for the job

    @graphed_on_first_call
    def step(self, y1, y2):
        loss = self.model.loss(y1, y2, self.global_batch)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=False)
        return loss.detach()

    def fit(self, loader, epochs):
        for ep in range(epochs):
            self.model.lambd = 0.0051 * (1 + ep / epochs)
            for (y1, y2), _ in loader:
                loss = self.step(y1.cuda(non_blocking=True), y2.cuda(non_blocking=True))
            if dist.get_rank() == 0:
                print(ep, float(loss))
