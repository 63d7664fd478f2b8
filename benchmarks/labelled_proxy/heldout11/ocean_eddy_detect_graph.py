"""Mesoscale eddy detection on daily altimetry sea-level-anomaly (SLA) tiles.

A small U-Net labels background / cyclonic / anticyclonic pixels; eddy centres are the local
maxima of the eddy probability. A coastline-band refiner runs as a second graph.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class EddyUNet(nn.Module):
    def __init__(self, c=32):
        super().__init__()
        self.e1, self.e2, self.e3 = block(1, c), block(c, 2 * c), block(2 * c, 4 * c)
        self.d2, self.d1 = block(6 * c, 2 * c), block(3 * c, c)
        self.head = nn.Conv2d(c, 3, 1)

    def forward(self, x):
        s1 = self.e1(x)
        s2 = self.e2(F.max_pool2d(s1, 2))
        b = self.e3(F.max_pool2d(s2, 2))
        y = self.d2(torch.cat([F.interpolate(b, scale_factor=2.0), s2], 1))
        y = self.d1(torch.cat([F.interpolate(y, scale_factor=2.0), s1], 1))
        return self.head(y)


class CoastRefiner(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(4, 16, 5, padding=2), nn.ReLU(), nn.Conv2d(16, 3, 1))

    def forward(self, prob, land):
        return prob + self.net(torch.cat([prob, land.expand(prob.shape[0], 1, -1, -1)], 1))


class EddyDetector:
    def __init__(self, net, refiner, land_mask, tile=256, batch=16):
        self.net, self.refiner = net.cuda().eval(), refiner.cuda().eval()
        self.land = land_mask.cuda()                       # bool (tile, tile)
        self.land_f = self.land.float()[None, None]
        self.static_sla = torch.zeros(batch, 1, tile, tile, device="cuda")
        self.side = torch.cuda.Stream()

    @torch.no_grad()
    def _segment(self, sla):
        prob = self.net(sla).softmax(1)
        torch.cuda.empty_cache()  # HAZARD: memory
        prob = prob.masked_fill(self.land, 0.0)  # CLEAN: masked_fill keeps the shape static
        score = prob[:, 1:].amax(1, keepdim=True)
        peaks = (score == F.max_pool2d(score, 9, 1, 4)) & (score > 0.6)
        peak_map = torch.where(peaks, score, torch.zeros_like(score))  # CLEAN: dense peak map, no data-dependent shape
        n_eddies = int(peaks.sum())  # HAZARD: host-sync
        centers = torch.nonzero(peaks)  # HAZARD: dynamic-shape
        return prob, peak_map, centers, n_eddies

    def capture(self):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            for _ in range(3):
                self._segment(self.static_sla)
        torch.cuda.current_stream().wait_stream(self.side)
        self.graph = torch.cuda.CUDAGraph()
        self.graph.capture_begin()  # HAZARD: stream
        self.prob, self.peak_map, self.centers, self.n = self._segment(self.static_sla)
        self.graph.capture_end()

        self.coast_graph = torch.cuda.CUDAGraph()
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side), torch.no_grad():
            for _ in range(3):
                self.refiner(self.prob, self.land_f)
        with torch.no_grad(), torch.cuda.graph(self.coast_graph, stream=self.side):  # CLEAN: captured on a non-default side stream after warm-up
            self.refined = self.refiner(self.prob, self.land_f)

    def detect(self, sla_tiles):
        self.static_sla.copy_(sla_tiles)  # CLEAN: in-place copy into the captured input
        self.graph.replay()
        self.coast_graph.replay()
        labels = self.refined.argmax(1)
        return labels.cpu(), self.peak_map.squeeze(1).cpu()


if __name__ == "__main__":
    land = torch.zeros(256, 256, dtype=torch.bool)
    land[:, :20] = True
    det = EddyDetector(EddyUNet(), CoastRefiner(), land)
    det.capture()
    labels, peaks = det.detect(torch.randn(16, 1, 256, 256, device="cuda") * 0.1)
