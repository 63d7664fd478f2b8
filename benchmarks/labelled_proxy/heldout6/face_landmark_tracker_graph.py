"""Real-time 68-point face landmark tracking: PFLD-style regressor + one-euro smoothing.

Face crops from the detector are batched into buckets of 1/2/4/8 faces; every bucket
has its own graph in one shared pool. A crowd larger than the biggest bucket gets a
new bucket captured on the fly. Smoothed landmarks are also copied to an overlay buffer
for the renderer.
"""
import math
import time
import torch
import torch.nn as nn

BUCKETS = [1, 2, 4, 8]
MAX_FACES = 32


def dw_block(cin, cout, stride):
    return nn.Sequential(nn.Conv2d(cin, cin, 3, stride, 1, groups=cin), nn.BatchNorm2d(cin), nn.ReLU6(),
                         nn.Conv2d(cin, cout, 1), nn.BatchNorm2d(cout), nn.ReLU6())


class PFLDLite(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.ReLU6())
        self.blocks = nn.Sequential(dw_block(32, 64, 2), dw_block(64, 128, 2), dw_block(128, 128, 2))
        self.head = nn.Linear(128, 136)

    def forward(self, x):
        return torch.sigmoid(self.head(self.blocks(self.stem(x)).mean((2, 3))))


class LandmarkTracker:
    def __init__(self, model, min_cutoff=1.0, beta=0.05):
        self.model = model.eval()
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.inp, self.out = {}, {}, {}
        self.prev = torch.zeros(MAX_FACES, 68, 2, device="cuda")
        self.overlay = torch.zeros(MAX_FACES, 68, 2, device="cuda")
        self.crop_size = torch.ones(MAX_FACES, 1, 2, device="cuda")
        self.overlay_stream = torch.cuda.Stream()
        self.min_cutoff, self.beta = min_cutoff, beta
        self.last_t = time.perf_counter()

    def _step(self, bs):
        lm = self.model(self.inp[bs]).view(bs, 68, 2)
        now = time.perf_counter()  # HAZARD: host-code
        dt = max(now - self.last_t, 1e-3)
        self.last_t = now
        prev = self.prev[:bs]
        speed = (lm - prev).norm(dim=-1, keepdim=True) / dt
        cutoff = self.min_cutoff + self.beta * speed  # CLEAN: min_cutoff and beta never change after capture
        alpha = 1.0 / (1.0 + 1.0 / (2 * math.pi * cutoff * dt))
        smoothed = alpha * lm + (1 - alpha) * prev
        with torch.cuda.stream(self.overlay_stream):  # HAZARD: stream
            self.overlay[:bs].copy_(smoothed * self.crop_size[:bs])
        return smoothed

    @torch.no_grad()
    def capture_all(self):
        s = torch.cuda.Stream()
        for bs in reversed(BUCKETS):
            self.inp[bs] = torch.zeros(bs, 3, 112, 112, device="cuda")
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    self._step(bs)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):  # CLEAN: warmed up on a side stream before capture
                self.out[bs] = self._step(bs)
            self.graphs[bs] = g

    @torch.no_grad()
    def _capture_lazy(self, bs):
        self.inp[bs] = torch.zeros(bs, 3, 112, 112, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool):  # HAZARD: api-misuse
            self.out[bs] = self._step(bs)
        self.graphs[bs] = g
        BUCKETS.append(bs)

    @torch.no_grad()
    def track(self, crops, boxes):
        n = crops.shape[0]
        bs = next((b for b in BUCKETS if b >= n), None)
        if bs is None:
            bs = min(1 << (n - 1).bit_length(), MAX_FACES)
            self._capture_lazy(bs)
        self.inp[bs][:n].copy_(crops)  # CLEAN: copy_ into the static input
        self.crop_size[:n].copy_((boxes[:, 2:] - boxes[:, :2]).unsqueeze(1))
        self.graphs[bs].replay()
        self.prev = torch.cat([self.out[bs], self.prev[bs:]])  # HAZARD: static-address
        return self.out[bs][:n].clone()


if __name__ == "__main__":
    tracker = LandmarkTracker(PFLDLite().cuda())
    tracker.capture_all()
    for n_faces in (1, 3, 3, 12, 2):
        crops = torch.rand(n_faces, 3, 112, 112, device="cuda")
        boxes = torch.rand(n_faces, 4, device="cuda").sort(-1).values * 640
        print(tracker.track(crops, boxes).shape)
