"""DDIM-style sampler whose denoiser is compiled with reduce-overhead."""
import math

import torch
import torch.nn as nn


def timestep_embedding(t, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, device=t.device) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([args.sin(), args.cos()], dim=-1)


class TinyUNet(nn.Module):
    def __init__(self, ch=64, emb_dim=128):
        super().__init__()
        self.emb_dim = emb_dim
        self.inp = nn.Conv2d(4, ch, 3, padding=1)
        self.t_mlp = nn.Sequential(nn.Linear(emb_dim, ch), nn.SiLU())
        self.mid = nn.Conv2d(ch, ch, 3, padding=1)
        self.out = nn.Conv2d(ch, 4, 3, padding=1)

    def forward(self, x, timestep, cond_scale):
        t = torch.full((x.shape[0],), timestep, device=x.device)  # HAZARD: python-scalar
        h = self.inp(x) + self.t_mlp(timestep_embedding(t, self.emb_dim))[:, :, None, None]
        h = self.mid(torch.nn.functional.silu(h))
        return self.out(h) * cond_scale  # CLEAN: guidance is the same float on every call


class Sampler:
    def __init__(self, unet, num_steps=50, guidance=7.5):
        self.unet = torch.compile(unet, mode="reduce-overhead")
        self.num_steps = num_steps
        self.guidance = guidance
        self.alphas = torch.linspace(0.9999, 0.01, 1000, device="cuda").cumprod(0)

    @torch.no_grad()
    def __call__(self, latents):
        ts = torch.linspace(999, 0, self.num_steps).long().tolist()  # CLEAN: CPU tensor built outside the compiled model
        trajectory = []
        for t in ts:
            eps = self.unet(latents, t, self.guidance)
            a = self.alphas[t]
            x0 = (latents - (1 - a).sqrt() * eps) / a.sqrt()
            latents = a.sqrt() * x0 + (1 - a).sqrt() * eps
            trajectory.append(eps)  # HAZARD: static-address
        return latents, trajectory


if __name__ == "__main__":
    sampler = Sampler(TinyUNet().cuda().eval())
    img, traj = sampler(torch.randn(4, 4, 64, 64, device="cuda"))
    print(img.shape, len(traj))
