"""Field-scale soil-moisture retrieval from Sentinel-1 backscatter for irrigation scheduling.

Patches stack VV, VH, VV/VH ratio, local incidence angle, NDVI (from the nearest Sentinel-2
date) and clay fraction. The encoder and the regressor are graphed with torch
make_graphed_callables; the regressor predicts volumetric soil moisture (m3/m3) per pixel.
"""
import numpy as np
import torch
import torch.nn as nn

ALL_BANDS = ("vv", "vh", "ratio", "lia", "ndvi", "clay", "dem", "slope")
USED = [0, 1, 2, 3, 4, 5]


class Encoder(nn.Module):
    def __init__(self, bands=USED, c=64):
        super().__init__()
        self.pol_channels = list(bands)
        self.ref_incidence = 39.0          # deg; ascending vs descending orbit changes it
        self.body = nn.Sequential(
            nn.Conv2d(len(bands), c, 3, padding=1), nn.GroupNorm(8, c), nn.GELU(),
            nn.Conv2d(c, c, 3, padding=1), nn.GroupNorm(8, c), nn.GELU(),
        )

    def forward(self, x):
        x = x[:, self.pol_channels]  # HAZARD: host-sync
        theta_ref = self.ref_incidence  # HAZARD: python-scalar
        cos_ratio = torch.cos(torch.deg2rad(x[:, 3:4])) / np.cos(np.deg2rad(theta_ref))
        x = torch.cat([x[:, :2] + 10.0 * torch.log10(cos_ratio.clamp_min(1e-3)), x[:, 2:]], dim=1)
        if self.training:
            gain = np.random.uniform(0.9, 1.1)  # HAZARD: host-code
            x = torch.cat([x[:, :2] * gain, x[:, 2:]], dim=1)
        return self.body(x)


class Regressor(nn.Module):
    def __init__(self, c=64):
        super().__init__()
        self.head = nn.Sequential(nn.Conv2d(c, 32, 1), nn.GELU(), nn.Conv2d(32, 1, 1))

    def forward(self, h, water):
        sm = 0.02 + 0.5 * torch.sigmoid(self.head(h))
        return torch.where(water > 0.5, torch.full_like(sm, 0.5), sm)  # CLEAN: torch.where instead of a mask index


grad_norms = []


def clip_hook(module, grad_in, grad_out):
    grad_norms.append(grad_out[0].norm())


def make_graphed(batch=16, size=128, c=64):
    enc, reg = Encoder().cuda(), Regressor().cuda()
    enc.register_full_backward_hook(clip_hook)  # HAZARD: api-misuse
    x = torch.randn(batch, len(ALL_BANDS), size, size, device="cuda")
    h = torch.randn(batch, c, size, size, device="cuda", requires_grad=True)
    w = torch.zeros(batch, 1, size, size, device="cuda")
    g_enc, g_reg = torch.cuda.make_graphed_callables((enc, reg), ((x,), (h, w)))
    reg.register_forward_hook(lambda m, i, o: None)  # CLEAN: hook added after graphing
    return enc, reg, g_enc, g_reg


def fit(loader, val, orbits, epochs=30):
    enc, reg, g_enc, g_reg = make_graphed()
    opt = torch.optim.AdamW(list(enc.parameters()) + list(reg.parameters()), lr=5e-4)
    for ep in range(epochs):
        enc.ref_incidence = orbits[ep % len(orbits)]
        enc.train(), reg.train()
        for x, water, sm_insitu, station_mask in loader:
            pred = g_reg(g_enc(x), water)
            loss = ((pred - sm_insitu).pow(2) * station_mask).sum() / station_mask.sum().clamp_min(1)
            opt.zero_grad(set_to_none=False)
            loss.backward()
            opt.step()
        enc.eval(), reg.eval()
        with torch.no_grad():
            x, water, sm_insitu, station_mask = val
            rmse = (((g_reg(g_enc(x), water) - sm_insitu) ** 2 * station_mask).sum() / station_mask.sum()).sqrt()  # CLEAN: eval mode falls back to the eager forward
        print(f"epoch {ep}: ubRMSE {rmse.item():.3f} m3/m3")


if __name__ == "__main__":
    def batch():
        return (torch.randn(16, 8, 128, 128, device="cuda"), torch.zeros(16, 1, 128, 128, device="cuda"),
                torch.rand(16, 1, 128, 128, device="cuda") * 0.4, (torch.rand(16, 1, 128, 128, device="cuda") > 0.99).float())
    fit([batch() for _ in range(6)], batch(), orbits=(39.0, 41.5))
