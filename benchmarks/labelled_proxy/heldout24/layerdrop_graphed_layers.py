"""Stochastic depth for a 48-layer speech-translation encoder, each layer graphed.

Two schemes are supported: per-sample drop paths drawn on the device inside the
graphed layer, and LayerDrop decided on the host between graphed calls.  Layers are
graphed one by one with torch.cuda.make_graphed_callables in a shared pool.
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F


class DropPathLayer(nn.Module):
    def __init__(self, d, heads, drop_p):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.drop_p = drop_p
        self.host_drop = False

    def _path(self, x):
        keep = 1.0 - self.drop_p  # HAZARD: python-scalar
        mask = (torch.rand(x.shape[0], 1, 1, device=x.device) < keep).to(x.dtype)  # CLEAN: default CUDA generator
        return mask / keep

    def forward(self, x):
        if self.host_drop and random.random() < self.drop_p:  # HAZARD: host-code
            return x * 1.0
        h = self.n1(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        x = x + a * self._path(x)
        x = x + self.ff(self.n2(x)) * self._path(x)
        return x


class Encoder(nn.Module):
    def __init__(self, depth=48, d=768, heads=12, max_drop=0.2, host_drop_layers=(0, 12, 24, 36)):
        super().__init__()
        self.layers = nn.ModuleList(
            DropPathLayer(d, heads, max_drop * i / (depth - 1)) for i in range(depth)
        )
        for i in host_drop_layers:
            self.layers[i].host_drop = True
        self.graphed = None
        self.probe_out = {}

    def _probe(self, mod, inp, out):
        self.probe_out["last"] = out.detach()

    def graph(self, batch, frames, d=768):
        pool = torch.cuda.graph_pool_handle()
        self.layers[-1].register_forward_hook(self._probe)  # HAZARD: api-misuse
        x = torch.randn(batch, frames, d, device="cuda", requires_grad=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: autocast cache disabled
            self.graphed = [
                torch.cuda.make_graphed_callables(layer, (x,), num_warmup_iters=3, pool=pool)
                for layer in self.layers
            ]

    def forward(self, x, layerdrop=0.0):
        for g in self.graphed:
            if self.training and layerdrop > 0 and random.random() < layerdrop:  # CLEAN: eager host decision between graphed calls
                continue
            x = g(x)
        return x


def train(encoder: Encoder, loader, steps=50000):
    encoder.cuda().train()
    encoder.graph(batch=16, frames=1500)
    opt = torch.optim.AdamW(encoder.parameters(), lr=5e-4)
    for step, (feats, target) in zip(range(steps), loader):
        feats = feats.cuda(non_blocking=True).requires_grad_()
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            out = encoder(feats, layerdrop=0.05)
        loss = F.mse_loss(out.float(), target.cuda())
        loss.backward()
        opt.step()  # CLEAN: eager step outside the graphs
        opt.zero_grad(set_to_none=True)
        if step == 10000:
            for layer in encoder.layers:
                layer.drop_p = layer.drop_p * 0.5
    return encoder


@torch.no_grad()
def evaluate(encoder, feats):
    encoder.eval()
    out = encoder(feats.cuda())  # CLEAN: eval flag differs, graphed layers run their eager forward
    encoder.train()
    return out
