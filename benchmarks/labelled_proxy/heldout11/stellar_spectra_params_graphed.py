"""Stellar-parameter regression (Teff, log g, [Fe/H]) from APOGEE-like H-band spectra.

A 1D-CNN encoder and an MLP head are wrapped with torch.cuda.make_graphed_callables for the
training loop; validation runs the modules in eval mode.
"""
import random

import torch
import torch.nn as nn

N_PIX = 7514


class SpectrumEncoder(nn.Module):
    def __init__(self, p_telluric=0.3):
        super().__init__()
        self.p_telluric = p_telluric
        self.gen = torch.Generator(device="cuda").manual_seed(5)
        self.register_buffer("telluric", torch.zeros(N_PIX, dtype=torch.bool))
        self.net = nn.Sequential(nn.Conv1d(1, 16, 9, stride=2, padding=4), nn.GELU(),
                                 nn.Conv1d(16, 32, 9, stride=4, padding=4), nn.GELU(),
                                 nn.Conv1d(32, 64, 9, stride=4, padding=4), nn.GELU(),
                                 nn.AdaptiveAvgPool1d(32), nn.Flatten())

    def forward(self, flux):
        if self.training and random.random() < self.p_telluric:  # HAZARD: host-code
            flux = flux.masked_fill(self.telluric, 1.0)
        if self.training:
            flux = flux + 0.01 * torch.randn(flux.shape, device=flux.device, generator=self.gen)  # HAZARD: rng
        return self.net(flux.unsqueeze(1))


class LabelHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(64 * 32 + 1, 256), nn.GELU(), nn.Linear(256, 3))

    def forward(self, z, snr):
        return self.mlp(torch.cat([z, torch.log10(snr)], 1))


def continuum_normalize(module, args):
    flux, = args
    return (flux / flux.median(dim=1, keepdim=True).values.clamp_min(1e-3),)


def build(batch=256):
    enc, head = SpectrumEncoder().cuda(), LabelHead().cuda()
    enc.register_forward_pre_hook(continuum_normalize)  # HAZARD: api-misuse
    flux = torch.rand(batch, N_PIX, device="cuda")
    z = torch.randn(batch, 64 * 32, device="cuda", requires_grad=True)
    snr = torch.full((batch, 1), 100.0, device="cuda")
    with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):  # CLEAN: autocast with its cache disabled is allowed
        g_enc, g_head = torch.cuda.make_graphed_callables((enc, head), ((flux,), (z, snr)))
    head.register_forward_hook(lambda m, a, out: None)  # CLEAN: hook registered after graphing is allowed
    return enc, head, g_enc, g_head


def train(loader, val_loader, epochs=30):
    enc, head, g_enc, g_head = build()
    opt = torch.optim.AdamW(list(enc.parameters()) + list(head.parameters()), lr=3e-4)
    scale = torch.tensor([5000.0, 3.0, 1.0], device="cuda")
    for epoch in range(epochs):
        enc.train(), head.train()
        for flux, snr, y in loader:
            with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):
                z = g_enc(flux)  # CLEAN: graphed callable called with positional tensors
                pred = g_head(z, snr=snr)  # HAZARD: api-misuse
            loss = nn.functional.smooth_l1_loss(pred.float(), y / scale)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        enc.eval(), head.eval()
        with torch.no_grad():
            err = sum((g_head(g_enc(f), s) * scale - y).abs().mean(0) for f, s, y in val_loader)  # CLEAN: eval mode runs the eager forward, not the graph
        print(epoch, (err / len(val_loader)).tolist())


if __name__ == "__main__":
    data = [(torch.rand(256, N_PIX, device="cuda"), torch.full((256, 1), 80.0, device="cuda"),
             torch.rand(256, 3, device="cuda") * torch.tensor([5000.0, 3.0, 1.0], device="cuda"))
            for _ in range(20)]
    train(data, data[:4])
