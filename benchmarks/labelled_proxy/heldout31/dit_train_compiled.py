"""Class-conditional DiT-S/2 training on precomputed SD-VAE latents (ImageNet 256 -> 32x32x4).

train.py from a DiT-style repo; the assistant's diff compiles the model and `opt.step` with
mode="reduce-overhead" and adds a CFG preview sampler that uses the compiled EMA model.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

T_DIFF, N_CLASSES, D, PATCH = 1000, 1000, 384, 2


class DiTBlock(nn.Module):
    def __init__(self, heads=6):
        super().__init__()
        self.heads = heads
        self.ada = nn.Linear(D, 6 * D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(approximate="tanh"), nn.Linear(4 * D, D))

    def forward(self, x, c):
        s1, b1, g1, s2, b2, g2 = self.ada(F.silu(c)).unsqueeze(1).chunk(6, -1)
        h = F.layer_norm(x, (D,)) * (1 + s1) + b1
        q, k, v = self.qkv(h).view(*h.shape[:2], 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        x = x + g1 * self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2))
        return x + g2 * self.mlp(F.layer_norm(x, (D,)) * (1 + s2) + b2)


class DiT(nn.Module):
    def __init__(self, depth=12, class_dropout_prob=0.1):
        super().__init__()
        self.x_emb = nn.Conv2d(4, D, PATCH, PATCH)
        self.pos = nn.Parameter(torch.zeros(1, 256, D))
        self.t_emb = nn.Sequential(nn.Linear(256, D), nn.SiLU(), nn.Linear(D, D))
        self.y_emb = nn.Embedding(N_CLASSES + 1, D)  # last row = null class for CFG
        self.blocks = nn.ModuleList(DiTBlock() for _ in range(depth))
        self.out = nn.Linear(D, PATCH * PATCH * 8)
        self.p_drop = class_dropout_prob

    def forward(self, x, t, y):
        if (t >= T_DIFF).any():  # HAZARD: dynamic-control-flow
            raise ValueError("timestep out of range")
        if self.training:
            drop = torch.from_numpy(np.random.rand(y.shape[0]) < self.p_drop).to(y.device)  # HAZARD: host-code
            y = torch.where(drop, torch.full_like(y, N_CLASSES), y)
        freqs = torch.exp(-np.log(10000) * torch.arange(128, device=x.device) / 128)
        te = torch.cat([torch.cos(t[:, None] * freqs), torch.sin(t[:, None] * freqs)], -1)
        c = self.t_emb(te) + self.y_emb(y)
        h = self.x_emb(x).flatten(2).transpose(1, 2) + self.pos
        for blk in self.blocks:
            h = blk(h, c)
        h = self.out(h).view(-1, 16, 16, PATCH, PATCH, 8).permute(0, 5, 1, 3, 2, 4).reshape(-1, 8, 32, 32)
        return h[:, :4]  # predicted noise (learned-sigma channels unused here)


betas = torch.linspace(1e-4, 0.02, T_DIFF, device="cuda")
abar = torch.cumprod(1 - betas, 0)
model, ema = DiT().cuda(), DiT().cuda().eval()
ema.load_state_dict(model.state_dict())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
cmodel = torch.compile(model, mode="reduce-overhead")
cema = torch.compile(ema, mode="reduce-overhead")
opt_step = torch.compile(opt.step, mode="reduce-overhead")


def train(loader, steps=400_000, warmup=5000):
    it = 0
    for z, y in loader:  # latents (256, 4, 32, 32), labels; drop_last=True
        z, y = z.cuda(non_blocking=True), y.cuda(non_blocking=True)
        t = torch.randint(0, T_DIFF, (z.shape[0],), device="cuda")
        noise = torch.randn_like(z)
        zt = abar[t].sqrt().view(-1, 1, 1, 1) * z + (1 - abar[t]).sqrt().view(-1, 1, 1, 1) * noise
        loss = F.mse_loss(cmodel(zt, t, y), noise)
        log_loss = loss.detach().clone()  # CLEAN: cloned before the backward and the compiled step
        loss.backward()
        for g in opt.param_groups:
            g["lr"] = 1e-4 * min(1.0, (it + 1) / warmup)  # HAZARD: optimizer
        opt_step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            for pe, p in zip(ema.parameters(), model.parameters()):
                pe.lerp_(p, 1 - 0.9999)  # CLEAN: eager EMA update
        if it % 100 == 0:
            print(f"step {it} loss {log_loss.item():.4f}")
        it += 1
        if it >= steps:
            break


@torch.no_grad()
def preview(classes, cfg_scale=4.0, n_steps=50):
    y = torch.tensor(classes, device="cuda")  # CLEAN: eager upload, outside the compiled model
    y_null = torch.full_like(y, N_CLASSES)
    x = torch.randn(len(classes), 4, 32, 32, device="cuda")
    for t_int in torch.linspace(T_DIFF - 1, 0, n_steps).long().tolist():
        t = torch.full((len(classes),), t_int, device="cuda")
        torch.compiler.cudagraph_mark_step_begin()  # CLEAN: new step for cudagraph trees
        eps_c = cema(x, t, y)
        eps_u = cema(x, t, y_null)
        eps = eps_u + cfg_scale * (eps_c - eps_u)  # HAZARD: static-address
        x0 = (x - (1 - abar[t_int]).sqrt() * eps) / abar[t_int].sqrt()
        x = abar[max(t_int - T_DIFF // n_steps, 0)].sqrt() * x0 + (1 - abar[max(t_int - T_DIFF // n_steps, 0)]).sqrt() * eps
    return x
