"""Retinal layer segmentation of OCT B-scans (8 boundaries ILM ... BM -> 9 classes),
fine-tuned on a clinic's own device data. Encoder and decoder are turned into
CUDA-graphed callables with torch.cuda.make_graphed_callables.
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

N_CLS = 9


class SpeckleEncoder(nn.Module):
    def __init__(self, c=32):
        super().__init__()
        self.blocks = nn.Sequential(
            nn.Conv2d(1, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
            nn.Conv2d(c, 2 * c, 3, stride=2, padding=1), nn.BatchNorm2d(2 * c), nn.ReLU(),
            nn.Conv2d(2 * c, 4 * c, 3, stride=2, padding=1), nn.BatchNorm2d(4 * c), nn.ReLU(),
        )

    def forward(self, bscan):
        if self.training and random.random() < 0.5:  # HAZARD: host-code
            bscan = torch.flip(bscan, dims=[-1])  # nasal/temporal mirror
        return self.blocks(bscan)


class LayerDecoder(nn.Module):
    def __init__(self, c=128):
        super().__init__()
        self.up = nn.Sequential(
            nn.ConvTranspose2d(c, c // 2, 2, 2), nn.ReLU(),
            nn.ConvTranspose2d(c // 2, c // 4, 2, 2), nn.ReLU(),
            nn.Conv2d(c // 4, N_CLS, 1),
        )

    def forward(self, feats):
        logits = self.up(feats)
        if torch.isnan(logits).any():  # HAZARD: dynamic-control-flow
            logits = torch.nan_to_num(logits)
        return logits


def log_activation_stats(module, inputs, output):
    module.last_std = output.detach().std()


def build(batch=4, H=496, W=512, device="cuda"):
    enc, dec = SpeckleEncoder().to(device), LayerDecoder().to(device)
    enc.register_forward_hook(log_activation_stats)  # HAZARD: api-misuse
    x = torch.randn(batch, 1, H, W, device=device)
    f = torch.randn(batch, 128, H // 4, W // 4, device=device, requires_grad=True)
    with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        g_enc, g_dec = torch.cuda.make_graphed_callables((enc, dec), ((x,), (f,)))
    dec.register_forward_hook(log_activation_stats)  # CLEAN: hook added after graphing runs outside the graph
    return enc, dec, g_enc, g_dec


def train(epochs=5, device="cuda"):
    enc, dec, g_enc, g_dec = build(device=device)
    params = list(enc.parameters()) + list(dec.parameters())
    opt = torch.optim.AdamW(params, lr=2e-4, weight_decay=1e-4)
    w_cls = torch.ones(N_CLS, device=device)
    w_cls[0] = 0.2  # vitreous / background dominates the B-scan
    for epoch in range(epochs):
        for _ in range(100):
            bscan = torch.randn(4, 1, 496, 512, device=device)
            target = torch.randint(0, N_CLS, (4, 496, 512), device=device)
            with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):  # CLEAN: autocast cache disabled around the replays
                logits = g_dec(g_enc(bscan))  # CLEAN: graphed callables called with positional tensors
            loss = F.cross_entropy(logits.float(), target, weight=w_cls)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")
    return enc, dec


if __name__ == "__main__":
    train()
