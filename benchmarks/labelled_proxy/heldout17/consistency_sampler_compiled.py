"""Few-step sampling from a guidance-distilled latent consistency model (LCM-style).

`install()` swaps the module-level `denoise` for a reduce-overhead compiled version; the
sampler alternates consistency jumps and re-noising along a short sigma schedule.
"""
import math

import torch
import torch.nn as nn

SIGMA = {"min": 0.002, "data": 0.5}
GUIDANCE = {"w": 7.5}
_net = None


def w_embedding(w, dim=256):
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=w.device) / half)
    return torch.cat([(w[:, None] * 1000 * freqs).sin(), (w[:, None] * 1000 * freqs).cos()], -1)


def denoise(x, sigma, labels):
    s_min, s_data = SIGMA["min"], SIGMA["data"]
    c_skip = s_data ** 2 / ((sigma - s_min) ** 2 + s_data ** 2)
    c_out = (sigma - s_min) * s_data / (sigma ** 2 + s_data ** 2).sqrt()
    c_in = 1.0 / (sigma ** 2 + s_data ** 2).sqrt()
    w = GUIDANCE["w"]  # HAZARD: python-scalar
    w_emb = w_embedding(torch.full_like(sigma, w))
    view = lambda t: t.view(-1, 1, 1, 1)
    out = _net(view(c_in) * x, sigma.log() / 4, labels, w_emb)
    print("denoise output std", out.std())  # HAZARD: host-code
    return view(c_skip) * x + view(c_out) * out


_eager_denoise = denoise


def renoise(x0, sigma):
    z = torch.randn_like(x0)  # CLEAN: default CUDA generator, eager code
    return x0 + math.sqrt(sigma ** 2 - SIGMA["min"] ** 2) * z


def install(net, mode="reduce-overhead"):
    global _net, denoise, preview_denoise
    _net = net.eval().cuda()
    denoise = torch.compile(_eager_denoise, mode=mode)
    preview_denoise = torch.compile(_eager_denoise)


@torch.no_grad()
def sample(labels, sigmas=(80.0, 24.4, 5.84, 0.66), latent=(4, 64, 64)):
    x = torch.randn(labels.shape[0], *latent, device="cuda") * sigmas[0]
    frames = []
    for i, s in enumerate(sigmas):
        sig = torch.full((labels.shape[0],), s, device="cuda")  # CLEAN: sigma passed as a tensor, not a Python float
        x0 = denoise(x, sig, labels)  # HAZARD: dynamic-shape
        frames.append(x0)  # HAZARD: static-address
        if i + 1 < len(sigmas):
            x = renoise(x0, sigmas[i + 1])
    return frames


@torch.no_grad()
def preview(labels, sigma=80.0, latent=(4, 64, 64)):
    x = torch.randn(labels.shape[0], *latent, device="cuda") * sigma
    sig = torch.full((labels.shape[0],), sigma, device="cuda")
    return preview_denoise(x, sig, labels)  # CLEAN: default torch.compile, no CUDA graphs


def serve(net, vae_decode, requests):
    install(net)
    images = []
    for req in requests:
        GUIDANCE["w"] = req.get("guidance", 7.5)
        labels = torch.tensor(req["class_ids"], device="cuda")  # CLEAN: eager tensor creation outside compiled code
        frames = sample(labels)
        strip = torch.cat(frames, -1)  # progressive previews shown side by side in the UI
        images.append(vae_decode(strip / 0.18215))
    return images


class LCMUNetStub(nn.Module):
    """Stand-in with the real signature; the production UNet is loaded from a checkpoint."""

    def __init__(self, ch=4, n_classes=1000):
        super().__init__()
        self.label = nn.Embedding(n_classes, 256)
        self.cond = nn.Linear(512, ch)
        self.conv = nn.Conv2d(ch, ch, 3, padding=1)

    def forward(self, x, t, y, w_emb):
        c = self.cond(torch.cat([self.label(y), w_emb], -1))[:, :, None, None]
        return self.conv(x + c + t.view(-1, 1, 1, 1))
