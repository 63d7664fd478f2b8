"""Cloud 'Enhance' button of a camera app: HDRNet-style tone mapping of full-resolution photos.

A low-resolution pass predicts a bilateral grid of affine colour transforms, which is
sliced with a learned guide map at full resolution. One CUDA graph per sensor size.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

GRID_D = 8


class CoeffNet(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.splat = nn.Sequential(
            nn.Conv2d(3, c, 3, 2, 1), nn.ReLU(), nn.Conv2d(c, 2 * c, 3, 2, 1), nn.ReLU(),
            nn.Conv2d(2 * c, 4 * c, 3, 2, 1), nn.ReLU(), nn.Conv2d(4 * c, 4 * c, 3, 2, 1), nn.ReLU())
        self.glob = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * c, 4 * c))
        self.out = nn.Conv2d(4 * c, GRID_D * 12, 1)
        self.guide = nn.Sequential(nn.Conv2d(3, 16, 1), nn.ReLU(), nn.Conv2d(16, 1, 1), nn.Sigmoid())

    def forward(self, lowres):
        f = self.splat(lowres)
        f = F.relu(f + self.glob(f)[:, :, None, None])
        b, _, h, w = f.shape
        return self.out(f).view(b, 12, GRID_D, h, w)


def slice_and_apply(grid, guide, full):
    B, _, H, W = full.shape
    gy, gx = torch.meshgrid(torch.linspace(-1, 1, H, device=full.device),
                            torch.linspace(-1, 1, W, device=full.device), indexing="ij")
    coords = torch.stack([gx.expand(B, H, W), gy.expand(B, H, W), guide[:, 0] * 2 - 1], -1)
    coeff = F.grid_sample(grid, coords[:, None], align_corners=True)[:, :, 0].view(B, 3, 4, H, W)
    return (coeff[:, :, :3] * full[:, None]).sum(2) + coeff[:, :, 3]


class Enhancer:
    def __init__(self, net, sizes=((3024, 4032), (2268, 4032), (1080, 1440)), device="cuda"):
        self.net = net.to(device).eval()
        self.user_ev = 0.0
        self.last_clip = 0.0
        self.graphs, self.io = {}, {}
        pool = torch.cuda.graph_pool_handle()
        side = torch.cuda.Stream()
        for hw in sorted(sizes, key=lambda s: -s[0] * s[1]):
            x = torch.zeros(1, 3, *hw, device=device)
            g = torch.cuda.CUDAGraph()
            side.wait_stream(torch.cuda.current_stream())
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
                with torch.cuda.stream(side):
                    for _ in range(2):
                        self._enhance(x)
                torch.cuda.current_stream().wait_stream(side)
                with torch.cuda.graph(g, pool=pool):
                    y = self._enhance(x)
            self.graphs[hw], self.io[hw] = g, (x, y)

    def _enhance(self, full):
        low = F.interpolate(full, size=(256, 256), mode="bilinear", align_corners=False)
        grid = self.net(low)
        guide = self.net.guide(full)
        out = slice_and_apply(grid.float(), guide.float(), full)
        out = out * 2.0 ** self.user_ev  # HAZARD: python-scalar
        out = out / out.amax(dim=(1, 2, 3), keepdim=True).clamp_min(1.0)  # CLEAN: highlight roll-off normalised on the device
        self._stats(out)
        torch.cuda.empty_cache()  # HAZARD: memory
        return out.clamp(0, 1)

    def _stats(self, out):
        self.last_clip = float((out >= 0.999).float().mean())  # HAZARD: host-sync

    def set_exposure(self, ev):
        self.user_ev = float(ev)  # exposure slider in the app, -2 .. +2 EV

    @torch.no_grad()
    def __call__(self, photo):
        hw = tuple(photo.shape[-2:])
        x, y = self.io[hw]
        x.copy_(photo)  # CLEAN: copy_ into the static input
        self.graphs[hw].replay()
        return y.clone()


def enhance_album(enhancer, photos, ev_per_photo):
    results = []
    for photo, ev in zip(photos, ev_per_photo):
        enhancer.set_exposure(ev)
        results.append(enhancer(photo.cuda(non_blocking=True)))  # CLEAN: host-to-device copy before the replay, outside the capture
    return results
