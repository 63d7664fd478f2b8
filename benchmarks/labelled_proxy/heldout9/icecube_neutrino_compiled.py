"""Neutrino direction and energy reconstruction for a cubic-kilometre ice detector.

Each event is a set of pulses (DOM x, y, z, time, charge, auxiliary flag) padded to 256.
A set transformer regresses the direction unit vector and log10 energy. Compiled models are
built by `build(model, **opts)` so the realtime alert system and the bulk reprocessing share
one code path.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

OPTS = dict(mode="max-autotune", dynamic=False)
MAX_PULSES = 256


def build(model, **opts):
    return torch.compile(model, **opts)


class Block(nn.Module):
    def __init__(self, d, heads=8):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, keep):                                   # keep: B, 1, 1, P
        B, P, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, P, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        x = x + self.proj(a.transpose(1, 2).reshape(B, P, D))
        return x + self.mlp(self.ln2(x))


class PulseSetTransformer(nn.Module):
    def __init__(self, d=128, layers=4):
        super().__init__()
        self.embed = nn.Linear(6, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(layers))
        self.direction = nn.Linear(d, 3)
        self.energy = nn.Linear(d, 1)
        self.last_energy = 0.0

    def forward(self, pulses, pad_mask):                         # B, P, 6 ; B, P (True = padding)
        h = self.embed(pulses)
        for blk in self.blocks:
            h = blk(h, (~pad_mask)[:, None, None, :])
        w = (~pad_mask).float()[..., None]
        pooled = (h * w).sum(1) / w.sum(1).clamp_min(1.0)  # CLEAN: masked mean with weights, fixed shape
        log10_e = self.energy(pooled).squeeze(-1)
        self.last_energy = log10_e.max().item()  # HAZARD: host-sync
        return F.normalize(self.direction(pooled), dim=-1), log10_e


class LineFitSeed(nn.Module):
    """Charge-weighted line fit on bright pulses, used to seed the realtime follow-up."""

    def forward(self, pulses):                                   # P, 6 for one event
        bright = pulses[pulses[:, 4] > 1.0]  # HAZARD: dynamic-shape
        q = bright[:, 4:5]
        cog = (bright[:, :3] * q).sum(0) / q.sum()
        t = bright[:, 3:4] - (bright[:, 3:4] * q).sum(0) / q.sum()
        v = ((bright[:, :3] - cog) * t * q).sum(0) / (t * t * q).sum().clamp_min(1e-6)
        return cog, F.normalize(v, dim=0)


@torch.no_grad()
def reprocess(reco, loader):
    dirs = []
    for pulses, pad in loader:                                  # padded to MAX_PULSES, 2048 events per batch
        d, log10_e = reco(pulses, pad)
        dirs.append(d)  # HAZARD: static-address
    return torch.cat(dirs)


@torch.no_grad()
def realtime_alert(reco, seed_fit, pulses, pad, threshold_log10_gev=5.0):
    d, log10_e = reco(pulses, pad)
    alert = torch.where(log10_e > threshold_log10_gev, 1.0, 0.0)  # CLEAN: torch.where, no host branch
    d, alert = d.clone(), alert.clone()  # CLEAN: cloned before the next compiled call
    cog, v = seed_fit(pulses[0])
    return d, alert, cog, v


if __name__ == "__main__":
    reco = build(PulseSetTransformer().cuda().eval(), **OPTS)
    seed_fit = build(LineFitSeed().cuda(), **OPTS)
    def batch():
        pad = torch.rand(2048, MAX_PULSES, device="cuda") > 0.6
        return torch.randn(2048, MAX_PULSES, 6, device="cuda"), pad
    all_dirs = reprocess(reco, [batch() for _ in range(20)])
    pulses, pad = batch()
    print(all_dirs.shape, realtime_alert(reco, seed_fit, pulses[:1], pad[:1])[1])
