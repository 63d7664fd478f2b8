import math

import torch
import torch.nn as nn


class TimestepEmbedding(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.SiLU(), nn.Linear(4 * dim, dim))

    def forward(self, t, batch: int, device):
        half = self.dim // 2
        freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=device, dtype=torch.float32) / half)
        args = t * freqs  # HAZARD: python-scalar
        emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1).expand(batch, -1)
        return self.mlp(emb)


class MiniUNet(nn.Module):
    def __init__(self, ch: int = 4, width: int = 128, cond_dim: int = 768):
        super().__init__()
        self.t_embed = TimestepEmbedding(width)
        self.cond_proj = nn.Linear(cond_dim, width)
        self.inp = nn.Conv2d(ch, width, 3, padding=1)
        self.mid = nn.Sequential(nn.GroupNorm(32, width), nn.SiLU(), nn.Conv2d(width, width, 3, padding=1))
        self.out = nn.Conv2d(width, ch, 3, padding=1)

    def forward(self, x, t, cond):
        print("unet forward", tuple(x.shape))  # HAZARD: host-code
        h = self.inp(x)
        h = h + (self.t_embed(t, x.shape[0], x.device) + self.cond_proj(cond.mean(1)))[:, :, None, None]
        return self.out(self.mid(h))


class EulerCFGSampler:
    def __init__(self, unet: nn.Module, num_steps: int = 30, guidance_scale: float = 7.5):
        self.unet = torch.compile(unet, mode="reduce-overhead")
        self.guidance_scale = guidance_scale
        sigmas = torch.linspace(14.6, 0.03, num_steps + 1)
        self.sigmas = sigmas.tolist()  # CLEAN: .tolist() once at setup on a CPU tensor, outside any compiled region
        self.timesteps = torch.linspace(999, 0, num_steps).round().long().tolist()

    @torch.no_grad()
    def __call__(self, latents, cond, uncond, keep_trajectory=False):
        trajectory = []
        latents = latents * self.sigmas[0]
        for i, t in enumerate(self.timesteps):
            x_in = torch.cat([latents, latents]) / math.sqrt(self.sigmas[i] ** 2 + 1)
            eps = self.unet(x_in, t, torch.cat([uncond, cond]))
            eps_u, eps_c = eps.chunk(2)
            guided = eps_u + self.guidance_scale * (eps_c - eps_u)
            if keep_trajectory:
                trajectory.append(eps)  # HAZARD: static-address
            latents = latents + (self.sigmas[i + 1] - self.sigmas[i]) * guided
        return latents, trajectory


if __name__ == "__main__":
    sampler = EulerCFGSampler(MiniUNet().cuda().eval())
    cond = torch.randn(1, 77, 768, device="cuda")
    img, traj = sampler(torch.randn(1, 4, 64, 64, device="cuda"), cond, torch.zeros_like(cond), keep_trajectory=True)
    print(img.std().item(), len(traj))
