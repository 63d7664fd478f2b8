"""StarDist-style nucleus detection on fluorescence (DAPI) tiles.

A small U-Net predicts an object probability and 32 radial distances per pixel;
local maxima above threshold become star-convex polygon proposals, which are
rasterised on the CPU. Detection and the QC pass are compiled with
options={"triton.cudagraphs": True}.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

CG = {"triton.cudagraphs": True}
N_RAYS, TILE = 32, 1024


class StarDistNet(nn.Module):
    def __init__(self, ch=32):
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(1, ch, 3, padding=1), nn.ReLU(), nn.Conv2d(ch, ch, 3, stride=2, padding=1), nn.ReLU())
        self.mid = nn.Sequential(nn.Conv2d(ch, 2 * ch, 3, padding=1), nn.ReLU(), nn.Conv2d(2 * ch, ch, 3, padding=1), nn.ReLU())
        self.up = nn.ConvTranspose2d(ch, ch, 2, stride=2)
        self.prob = nn.Conv2d(ch, 1, 1)
        self.dist = nn.Conv2d(ch, N_RAYS, 1)

    def forward(self, x):
        h = self.up(self.mid(self.down(x)))
        return torch.sigmoid(self.prob(h)), F.softplus(self.dist(h))


net = StarDistNet().cuda().eval()


@torch.compile(options=CG)
def detect(tile, prob_thr=0.5):
    tile.sub_(tile.mean((2, 3), keepdim=True)).div_(tile.std((2, 3), keepdim=True) + 1e-6)  # HAZARD: static-address
    prob, dist = net(tile)
    peak = (prob == F.max_pool2d(prob, 3, 1, 1)) & (prob > prob_thr)
    nms = torch.where(peak, prob, torch.zeros_like(prob))  # CLEAN: fixed-shape candidate map
    scores = prob[peak]  # HAZARD: dynamic-shape
    rays = dist.permute(0, 2, 3, 1)[peak.squeeze(1)]
    counts = peak.flatten(1).sum(1).tolist()  # HAZARD: host-sync
    print("tile:", counts[0], "nuclei")  # HAZARD: host-code
    return nms, scores, rays


@torch.compile(options=CG)
def detect_qc(tile):
    tile = (tile - tile.mean((2, 3), keepdim=True)) / (tile.std((2, 3), keepdim=True) + 1e-6)  # CLEAN: out-of-place normalisation
    prob, _ = net(tile)
    return (prob > 0.5).float().mean((1, 2, 3))


def rays_to_polygons(centres, rays):
    angles = torch.arange(N_RAYS) * (2 * math.pi / N_RAYS)
    ys = centres[:, :1] + rays * torch.sin(angles)
    xs = centres[:, 1:] + rays * torch.cos(angles)
    return torch.stack([ys, xs], -1)


@torch.no_grad()
def segment_slide(tiles):
    """tiles: iterable of (row, col, uint16 tensor [1, 1, TILE, TILE])."""
    results, qc = [], []
    for r, c, raw in tiles:
        img = raw.float().cuda(non_blocking=True) / 65535.0
        qc.append(detect_qc(img).clone())  # CLEAN: cloned before the next compiled call
        nms, scores, rays = detect(img)
        ys, xs = torch.nonzero(nms[0, 0] > 0, as_tuple=True)  # CLEAN: outside the compiled functions
        centres = torch.stack([ys + r * TILE, xs + c * TILE], 1).float().cpu()
        results.append((rays_to_polygons(centres, rays.cpu()), scores.cpu()))
    fractions = torch.cat(qc).cpu().tolist()
    return results, fractions
