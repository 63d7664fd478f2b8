"""Orchard yield estimation: apple counting by density regression on tree-row images.

A CSRNet-style network predicts a density map per image tile; counts are summed per tree.
The counting step is captured through a small context-manager helper shared with the
flower-cluster counter.
"""
import contextlib
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("orchard")


@contextlib.contextmanager
def graph_capture(pool=None):
    g = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()  # CLEAN: synchronize before the capture begins
    with torch.cuda.graph(g, pool=pool):  # HAZARD: api-misuse
        yield g
    torch.cuda.synchronize()


class DensityNet(nn.Module):
    def __init__(self):
        super().__init__()
        cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512]
        layers, c = [], 3
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2))
            else:
                layers += [nn.Conv2d(c, v, 3, padding=1), nn.ReLU(inplace=True)]
                c = v
        self.front = nn.Sequential(*layers)
        self.back = nn.Sequential(
            nn.Conv2d(c, 256, 3, padding=2, dilation=2), nn.ReLU(inplace=True),
            nn.Conv2d(256, 128, 3, padding=2, dilation=2), nn.ReLU(inplace=True),
            nn.Conv2d(128, 1, 1),
        )

    def forward(self, x):
        return F.relu(self.back(self.front(x)))


class RowCounter:
    def __init__(self, net, tiles_per_pass=12, tile=512, n_tta=2):
        self.net = net.cuda().eval()
        self.tiles = torch.zeros(tiles_per_pass, 3, tile, tile, device="cuda")
        self.n_tta = n_tta
        self.tta_gen = torch.Generator(device="cuda").manual_seed(99)
        self.row_id = 0

    def _count(self, tiles):
        dens = self.net(tiles)
        for _ in range(self.n_tta):
            jitter = 1.0 + 0.05 * (torch.rand(tiles.shape[0], 1, 1, 1, device=tiles.device, generator=self.tta_gen) - 0.5)  # HAZARD: rng
            dens = dens + self.net(tiles * jitter)
        dens = dens / (1 + self.n_tta)
        dens = F.avg_pool2d(dens, 2) * 4.0  # CLEAN: fixed-size pooling, count preserved
        n_fruit = int(dens.sum())  # HAZARD: host-sync
        log.debug(f"row {self.row_id}: peak density {dens.max()}")  # HAZARD: host-sync
        torch.cuda.empty_cache()  # HAZARD: memory
        return dens, n_fruit

    @torch.no_grad()
    def capture(self):
        log.info("capturing orchard counting graph")  # CLEAN: plain string, outside the region
        with graph_capture() as g:
            log.info("tile batch of %d", self.tiles.shape[0])  # CLEAN: plain values logged once during capture
            self.dens, self.count_at_capture = self._count(self.tiles)
        self.graph = g

    def count_row(self, row_tiles, per_tree_slices):
        self.tiles.copy_(row_tiles)
        self.graph.replay()
        per_tile = self.dens.sum(dim=(1, 2, 3))
        return [float(per_tile[s].sum()) for s in per_tree_slices]  # CLEAN: host reads after the replay


if __name__ == "__main__":
    counter = RowCounter(DensityNet())
    counter.capture()
    trees = [slice(0, 3), slice(3, 6), slice(6, 9), slice(9, 12)]
    yield_estimate = []
    for row in range(40):
        counter.row_id = row
        tiles = torch.rand(12, 3, 512, 512, device="cuda")
        yield_estimate += counter.count_row(tiles, trees)
    print("apples in block:", round(sum(yield_estimate)))
