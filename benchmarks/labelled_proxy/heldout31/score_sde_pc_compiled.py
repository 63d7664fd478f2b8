"""VE-SDE predictor-corrector sampling (Song et al. 2021) for 32x32 images with a small NCSN++-style score net.

The assistant put `@torch.compile(mode="reduce-overhead")` on the PC step
("1000 steps x 2 network calls is launch-bound") and added a trajectory dump for the paper figure.
"""
import logging
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

SIGMA_MIN, SIGMA_MAX, N_STEPS = 0.01, 50.0, 1000
log = logging.getLogger("sde")


class ScoreNet(nn.Module):
    def __init__(self, ch=128):
        super().__init__()
        self.t_emb = nn.Sequential(nn.Linear(1, ch), nn.SiLU(), nn.Linear(ch, ch))
        self.down = nn.Sequential(nn.Conv2d(3, ch, 3, padding=1), nn.SiLU(), nn.Conv2d(ch, ch, 3, 2, 1), nn.SiLU())
        self.mid = nn.Sequential(nn.Conv2d(ch, ch, 3, padding=1), nn.GroupNorm(32, ch), nn.SiLU())
        self.up = nn.Sequential(nn.ConvTranspose2d(ch, ch, 4, 2, 1), nn.SiLU(), nn.Conv2d(ch, 3, 3, padding=1))

    def forward(self, x, sigma):
        h = self.down(x) + self.t_emb(sigma.log().view(-1, 1))[:, :, None, None]
        return self.up(self.mid(h)) / sigma.view(-1, 1, 1, 1)


net = ScoreNet().cuda().eval()


@torch.compile(mode="reduce-overhead")
def pc_step(x, t, dt, snr):
    sigma_t = SIGMA_MIN * (SIGMA_MAX / SIGMA_MIN) ** t  # HAZARD: python-scalar
    sigma = torch.full((x.shape[0],), sigma_t, device=x.device)
    # corrector: one Langevin step
    score = net(x, sigma)
    noise = torch.randn_like(x)
    g_norm = score.flatten(1).norm(dim=1).mean()
    n_norm = noise.flatten(1).norm(dim=1).mean()
    eps = 2 * (snr * n_norm / g_norm) ** 2
    x = x + eps * score + (2 * eps).sqrt() * noise
    log.debug("langevin step size %s", eps)  # HAZARD: host-code
    # predictor: reverse-diffusion (Euler-Maruyama)
    g2 = sigma_t ** 2 * 2 * math.log(SIGMA_MAX / SIGMA_MIN)
    x_mean = x + g2 * net(x, sigma) * dt
    x = x_mean + math.sqrt(g2 * dt) * torch.randn_like(x)
    if torch.isnan(x).any():  # HAZARD: dynamic-control-flow
        print("sampler diverged at sigma", sigma_t)
    return x, x_mean


@torch.compile(mode="reduce-overhead")
def pc_step_tensor_t(x, sigma, g2dt, snr_t):
    score = net(x, sigma)  # CLEAN: noise level passed as a device tensor, no recompiles
    noise = torch.randn_like(x)
    eps = 2 * (snr_t * noise.flatten(1).norm(dim=1).mean() / score.flatten(1).norm(dim=1).mean()) ** 2
    x = x + eps * score + (2 * eps).sqrt() * noise
    x_mean = x + g2dt.view(-1, 1, 1, 1) * net(x, sigma)
    return x_mean + g2dt.sqrt().view(-1, 1, 1, 1) * torch.randn_like(x), x_mean


@torch.no_grad()
def sample(n=64, snr=0.16, save_every=100):
    x = torch.randn(n, 3, 32, 32, device="cuda") * SIGMA_MAX
    dt = 1.0 / N_STEPS
    traj = []
    for i in range(N_STEPS):
        t = 1.0 - i * dt
        x, x_mean = pc_step(x.clone(), t, dt, snr)  # CLEAN: input cloned before feeding it back
        if i % save_every == 0:
            traj.append(x_mean)  # HAZARD: static-address
            print(f"step {i}/{N_STEPS}")  # CLEAN: eager print outside the compiled step
    return x_mean.clone(), traj


@torch.no_grad()
def sample_fast(n=64, snr=0.16):
    x = torch.randn(n, 3, 32, 32, device="cuda") * SIGMA_MAX
    ts = torch.linspace(1.0, 1.0 / N_STEPS, N_STEPS, device="cuda")
    sigmas = SIGMA_MIN * (SIGMA_MAX / SIGMA_MIN) ** ts
    g2dt = sigmas ** 2 * 2 * math.log(SIGMA_MAX / SIGMA_MIN) / N_STEPS
    snr_t = torch.tensor(snr, device="cuda")  # CLEAN: built once, outside the compiled step
    for i in range(N_STEPS):
        x, x_mean = pc_step_tensor_t(x.clone(), sigmas[i].expand(n), g2dt[i].expand(n), snr_t)
    return x_mean.clone()
