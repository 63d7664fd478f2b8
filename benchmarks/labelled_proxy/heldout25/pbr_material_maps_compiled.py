"""PBR material maps from a single photo (albedo -> normal / roughness / height) for the
asset pipeline. Ported from the team's Chainer 5 code: `xp = cuda.get_array_module(x)`
became NumPy calls, `F.concat` became `torch.cat`, and the updater loop became `bake()`.
The generator is compiled with mode="max-autotune".
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, cin, cout, down=True):
        super().__init__()
        self.c = (nn.Conv2d(cin, cout, 4, 2, 1) if down else nn.ConvTranspose2d(cin, cout, 4, 2, 1))
        self.bn = nn.BatchNorm2d(cout)

    def __call__(self, x):                      # Chainer habit: __call__ instead of forward
        return F.leaky_relu(self.bn(self.c(x)), 0.2)


class MaterialNet(nn.Module):
    def __init__(self, ch=64):
        super().__init__()
        self.enc = nn.ModuleList([Block(3, ch), Block(ch, 2 * ch), Block(2 * ch, 4 * ch)])
        self.dec = nn.ModuleList([Block(4 * ch, 2 * ch, False), Block(4 * ch, ch, False), Block(2 * ch, ch, False)])
        self.out = nn.Conv2d(ch, 5, 3, padding=1)       # normal xyz, roughness, height
        self.stats = {}

    def forward(self, albedo):
        skips, h = [], albedo
        for b in self.enc:
            h = b(h)
            skips.append(h)
        for i, b in enumerate(self.dec):
            h = b(h if i == 0 else torch.cat([h, skips[-1 - i]], 1))
        y = self.out(h)
        normal = F.normalize(torch.cat([y[:, :2], F.softplus(y[:, 2:3]) + 1e-3], 1), dim=1)
        rough, height = torch.sigmoid(y[:, 3:4]), torch.tanh(y[:, 4:5])
        if albedo.mean() > 0.9:  # HAZARD: dynamic-control-flow
            rough = rough.clamp(min=0.3)
        self.stats["rough_hist"] = rough.flatten(1).cpu().numpy()  # HAZARD: host-sync
        alpha = albedo.amax(1, keepdim=True) > 0.02
        height = torch.where(alpha, height, torch.zeros_like(height))  # CLEAN: masked by select, static shape
        return normal, rough, height, alpha


def height_stats(height, alpha):
    valid = height[alpha]  # HAZARD: dynamic-shape
    print("height range", valid.min(), valid.max())  # HAZARD: host-code
    return valid.mean(), valid.std()


def bake(model, photos, size=512):
    gen = torch.compile(model.cuda().eval(), mode="max-autotune")
    stats = torch.compile(height_stats, mode="max-autotune")
    maps = []
    with torch.no_grad():
        for ph in photos:
            x = F.interpolate(ph.cuda()[None], size=(size, size), mode="area")  # CLEAN: resized to one size before the compiled call
            n, r, h, a = gen(x)
            maps.append(tuple(t.clone() for t in (n, r, h)))  # CLEAN: outputs cloned before the next call
            m, s = stats(h.clone(), a.clone())
            maps[-1] += ((m.item(), s.item()),)
    return maps


def preview(model, ph):
    quick = torch.compile(model.cuda().eval())
    with torch.no_grad():
        n, r, h, a = quick(ph.cuda()[None])  # CLEAN: default compile, no CUDA graphs
        rough_mean = np.mean(model.stats["rough_hist"])
    return n, float(rough_mean)


def save_maps(maps, prefix):
    for i, (n, r, h, st) in enumerate(maps):
        nn_img = ((n[0].permute(1, 2, 0) * 0.5 + 0.5) * 255).byte().cpu().numpy()  # CLEAN: eager export
        np.save(f"{prefix}_{i}_normal.npy", nn_img)
        np.save(f"{prefix}_{i}_rough.npy", r[0, 0].cpu().numpy())
        np.save(f"{prefix}_{i}_height.npy", h[0, 0].cpu().numpy())
