"""Statistical downscaling of daily precipitation from a 100 km GCM grid to 25 km.

The eager `Downscaler` is what the climate scientists use in notebooks; the operational
subclass compiles the generator once in its constructor and runs the ensemble members for
each regional domain of the national climate-service product.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ResBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.GELU(), nn.Conv2d(c, c, 3, padding=1))

    def forward(self, x):
        return x + self.body(x)


class DownscaleNet(nn.Module):
    def __init__(self, n_vars=6, c=64):
        super().__init__()
        self.inp = nn.Conv2d(n_vars + 2, c, 3, padding=1)           # + elevation, land fraction
        self.blocks = nn.Sequential(*[ResBlock(c) for _ in range(6)])
        self.out = nn.Conv2d(c, 2, 3, padding=1)                     # wet probability, amount

    def forward(self, x):
        return self.out(self.blocks(self.inp(x)))


class Downscaler:
    def __init__(self, net, scale=4, pr_cap_mm=500.0):
        self.net = net.cuda().eval()
        self.scale, self.pr_cap_mm = scale, pr_cap_mm

    def _generate(self, coarse, static_fields, noise):
        up = F.interpolate(coarse, scale_factor=self.scale, mode="bilinear", align_corners=False)
        y = self.net(torch.cat([up + 0.1 * noise, static_fields], dim=1))
        wet = torch.sigmoid(y[:, :1])
        pr = wet * torch.expm1(F.softplus(y[:, 1:]))
        if (pr > self.pr_cap_mm).any():  # HAZARD: dynamic-control-flow
            pr = pr.clamp(max=self.pr_cap_mm)
        return pr

    @torch.no_grad()
    def downscale(self, coarse, static_fields, noise):
        return self._generate(coarse, static_fields, noise)


class OperationalDownscaler(Downscaler):
    def __init__(self, net, scale=4, pr_cap_mm=500.0):
        super().__init__(net, scale, pr_cap_mm)
        self._generate = torch.compile(self._generate, mode="reduce-overhead")

    def ensemble(self, coarse, static_fields, n_members=10):
        members = []
        for _ in range(n_members):
            noise = torch.randn_like(F.interpolate(coarse, scale_factor=self.scale))
            members.append(self.downscale(coarse, static_fields, noise))  # HAZARD: static-address
        return torch.cat(members, dim=1)

    def ensemble_stats(self, coarse, static_fields, n_members=10):
        total = torch.zeros_like(static_fields[:, :1])
        sq = torch.zeros_like(total)
        for _ in range(n_members):
            noise = torch.randn_like(F.interpolate(coarse, scale_factor=self.scale))
            pr = self.downscale(coarse, static_fields, noise)
            total += pr  # CLEAN: consumed before the next compiled call
            sq += pr * pr
        mean = total / n_members
        return mean, (sq / n_members - mean * mean).clamp_min(0).sqrt()


def run_product(op, domains):
    out = {}
    for name, (coarse, static_fields) in domains.items():   # Alps, Pyrenees, Scandinavia, ... each its own grid
        out[name] = op.ensemble_stats(coarse, static_fields)  # HAZARD: dynamic-shape
    return out


if __name__ == "__main__":
    net = DownscaleNet()
    domains = {
        "alps": (torch.randn(1, 6, 40, 56, device="cuda"), torch.randn(1, 2, 160, 224, device="cuda")),
        "pyrenees": (torch.randn(1, 6, 24, 64, device="cuda"), torch.randn(1, 2, 96, 256, device="cuda")),
        "scandinavia": (torch.randn(1, 6, 72, 48, device="cuda"), torch.randn(1, 2, 288, 192, device="cuda")),
    }
    notebook = Downscaler(net)
    quicklook = notebook.downscale(*domains["alps"], torch.zeros(1, 6, 160, 224, device="cuda"))  # CLEAN: eager base class, no graph
    op = OperationalDownscaler(net)
    stats = run_product(op, domains)
    members = op.ensemble(*domains["alps"])
    print({k: float(v[0].mean()) for k, v in stats.items()}, members.shape, float(quicklook.mean()))
