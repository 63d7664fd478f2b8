"""Old-photo colorization for a family-archive app.

The scanned greyscale photo is resized to one of a few buckets, a U-Net
predicts the ab chroma channels in Lab space and the result is recombined
with the full-resolution luminance on the client. Buckets share one pool.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("colorize")


def conv(i, o, s=1):
    return nn.Sequential(nn.Conv2d(i, o, 3, stride=s, padding=1), nn.BatchNorm2d(o), nn.ReLU(inplace=True))


class ColorUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.d1, self.d2, self.d3 = conv(1, 32), conv(32, 64, 2), conv(64, 128, 2)
        self.mid = conv(128, 128)
        self.u2, self.u1 = conv(128 + 64, 64), conv(64 + 32, 32)
        self.ab = nn.Conv2d(32, 2, 1)

    def forward(self, L):
        x1 = self.d1(L)
        x2 = self.d2(x1)
        x3 = self.mid(self.d3(x2))
        y = self.u2(torch.cat([F.interpolate(x3, scale_factor=2.0), x2], 1))
        y = self.u1(torch.cat([F.interpolate(y, scale_factor=2.0), x1], 1))
        return torch.tanh(self.ab(y))


class Colorizer:
    def __init__(self, model, sizes=((256, 256), (384, 512))):
        self.model = model.cuda().eval()
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.inp, self.out = {}, {}, {}
        self.sizes = list(sizes)

    def _colorize(self, L):
        ab = self.model(L)
        log.debug(f"mean chroma {ab.abs().mean():.3f}")  # HAZARD: host-sync
        ab = torch.where(L < 0.02, torch.zeros_like(ab), ab)  # CLEAN: fixed-shape desaturation of near-black pixels
        hot = (ab.abs() > 0.95).nonzero()  # HAZARD: dynamic-shape
        ab[hot.unbind(1)] = 0.9 * ab[hot.unbind(1)].sign()
        return torch.cat([L, ab], dim=1)

    def _capture(self, size):
        L = torch.zeros(1, 1, *size, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool):
            self.out[size] = self._colorize(L)
        self.graphs[size], self.inp[size] = g, L

    def build(self):
        with torch.autocast("cuda", dtype=torch.float16), torch.no_grad():  # HAZARD: autocast-cache
            for size in sorted(self.sizes, key=lambda s: s[0] * s[1], reverse=True):
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(3):
                        self._colorize(torch.zeros(1, 1, *size, device="cuda"))
                torch.cuda.current_stream().wait_stream(side)
                self._capture(size)

    def add_size(self, size):
        # a new phone model uploads a new aspect ratio; grab a graph for it on the fly
        g = torch.cuda.CUDAGraph()
        L = torch.zeros(1, 1, *size, device="cuda")
        with torch.no_grad(), torch.cuda.graph(g, pool=self.pool):  # HAZARD: api-misuse
            self.out[size] = self._colorize(L)
        self.graphs[size], self.inp[size] = g, L
        self.sizes.append(size)

    def __call__(self, L_full):
        size = min(self.sizes, key=lambda s: abs(s[0] / s[1] - L_full.shape[-2] / L_full.shape[-1]))
        self.inp[size].copy_(F.interpolate(L_full, size=size, mode="area"))  # CLEAN: resized into the captured input
        self.graphs[size].replay()
        ab = F.interpolate(self.out[size][:, 1:], size=L_full.shape[-2:], mode="bilinear")
        return torch.cat([L_full, ab], dim=1)


if __name__ == "__main__":
    c = Colorizer(ColorUNet())
    c.build()
    c.add_size((512, 384))
    for _ in range(64):
        scan = torch.rand(1, 1, 1200, 1600, device="cuda")
        lab = c(scan)
        lab_cpu = lab.float().cpu()  # CLEAN: host copy after the replay, outside the graph
