"""Karras/Euler sampler with classifier-free guidance; the UNet runs under max-autotune."""
import math

import torch
import torch.nn as nn


def karras_sigmas(n, sigma_min=0.002, sigma_max=80.0, rho=7.0):
    ramp = torch.linspace(0, 1, n)
    inv = sigma_max ** (1 / rho) + ramp * (sigma_min ** (1 / rho) - sigma_max ** (1 / rho))
    return torch.cat([inv ** rho, torch.zeros(1)])


class TinyUNet(nn.Module):
    def __init__(self, ch=320, ctx_dim=768, freq_dim=256):
        super().__init__()
        self.conv_in = nn.Conv2d(4, ch, 3, padding=1)
        self.time_mlp = nn.Sequential(nn.Linear(freq_dim, ch), nn.SiLU(), nn.Linear(ch, ch))
        self.ctx = nn.Linear(ctx_dim, ch)
        self.conv_out = nn.Conv2d(ch, 4, 3, padding=1)
        self.high_noise_gain = nn.Parameter(torch.ones(1))
        self.register_buffer("freqs", torch.exp(-math.log(10000) * torch.arange(freq_dim // 2) / (freq_dim // 2)))

    def forward(self, x, sigma, context):
        c_noise = sigma.log() / 4
        if (sigma > 10).any():  # HAZARD: dynamic-control-flow
            x = x * self.high_noise_gain
        ang = c_noise[:, None] * self.freqs[None]
        emb = self.time_mlp(torch.cat([ang.sin(), ang.cos()], dim=-1))
        h = self.conv_in(x) + emb[:, :, None, None] + self.ctx(context.mean(1))[:, :, None, None]
        return self.conv_out(torch.nn.functional.silu(h))


class EulerSampler:
    def __init__(self, unet, num_steps=30, cfg_scale=7.5):
        self.raw_unet = unet
        self.unet = torch.compile(unet, mode="max-autotune")
        self.sigmas = karras_sigmas(num_steps).cuda()
        self.sigmas_host = self.sigmas.tolist()  # CLEAN: host copy made once, outside any compiled region
        self.cfg_scale = cfg_scale
        self.step_fn = torch.compile(self._euler_step, mode="reduce-overhead")

    @staticmethod
    def _euler_step(x, denoised, sigma, dt):
        d = (x - denoised) / sigma  # HAZARD: python-scalar
        return x + d * dt  # CLEAN: step size passed in as a 0-d device tensor

    def denoise(self, x, sigma_t, context, uncond):
        x_in = torch.cat([x, x])
        s_in = sigma_t.expand(x_in.shape[0])
        eps_u, eps_c = self.unet(x_in, s_in, torch.cat([uncond, context])).chunk(2)
        eps = eps_u + (eps_c - eps_u) * self.cfg_scale  # CLEAN: guidance applied in eager code, outside the compiled UNet
        return x - eps * sigma_t

    def set_freq_base(self, base):
        d = self.raw_unet.freqs.numel()
        self.raw_unet.freqs = torch.exp(-math.log(base) * torch.arange(d, device="cuda") / d)  # HAZARD: static-address

    @torch.no_grad()
    def sample(self, context, uncond, shape=(1, 4, 128, 128)):
        x = torch.randn(shape, device="cuda") * self.sigmas_host[0]
        trajectory = []
        for i in range(len(self.sigmas_host) - 1):
            sigma_t = self.sigmas[i]
            denoised = self.denoise(x, sigma_t, context, uncond)
            x = self.step_fn(x, denoised, self.sigmas_host[i], self.sigmas[i + 1] - sigma_t)
            trajectory.append(x)  # HAZARD: static-address
            if i % 10 == 0:
                print(f"step {i} sigma={self.sigmas_host[i]:.3f} std={x.std().item():.3f}")
        return x, trajectory
