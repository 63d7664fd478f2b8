"""Steganalysis screen in the upload pipeline of an image-hosting service (SRNet-like).

Decoded luma planes are batched per size bucket; images whose stego probability is
high are held back for manual review. One CUDA graph per bucket, one shared pool.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

SRM_3x3 = [[-1, 2, -1], [2, -4, 2], [-1, 2, -1]]
KV_5x5 = [[-1, 2, -2, 2, -1], [2, -6, 8, -6, 2], [-2, 8, -12, 8, -2], [2, -6, 8, -6, 2], [-1, 2, -2, 2, -1]]


class SRNetLite(nn.Module):
    def __init__(self, trunc_levels=(1.0, 2.0, 3.0)):
        super().__init__()
        k3 = torch.zeros(1, 1, 5, 5)
        k3[0, 0, 1:4, 1:4] = torch.tensor(SRM_3x3, dtype=torch.float32) / 4
        kv = torch.tensor(KV_5x5, dtype=torch.float32)[None, None] / 12
        self.register_buffer("srm", torch.cat([k3, kv]))  # CLEAN: filter bank built on the CPU in __init__, moved with .to()
        self.trunc_levels = list(trunc_levels)
        c = 2 * len(trunc_levels)
        self.body = nn.Sequential(
            nn.Conv2d(c, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, 2, 1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, 128, 3, 2, 1), nn.BatchNorm2d(128), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(128, 2)

    def forward(self, y):
        r = F.conv2d(y, self.srm, padding=2)[:, :, None]                     # [B, 2, 1, H, W]
        T = torch.tensor(self.trunc_levels, device=y.device).view(1, 1, -1, 1, 1)  # HAZARD: host-sync
        r = torch.minimum(r.abs(), T) * r.sign()
        return self.head(self.body(r.flatten(1, 2)).flatten(1))


class UploadScreen:
    def __init__(self, net, buckets=((1024, 1024), (512, 512)), batch=16, threshold=0.9, device="cuda"):
        self.net = net.to(device).eval()
        self.threshold = threshold
        self.batch, self.device = batch, device
        self.hot = torch.zeros((), device=device)
        self.flag_score = torch.zeros((), device=device)
        self.verdict = torch.zeros(batch, device=device)
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.io = {}, {}
        for hw in buckets:
            self._capture(hw)

    def _screen(self, x):
        p = self.net(x).float().softmax(-1)[:, 1]
        if p.max() > 0.99:  # HAZARD: dynamic-control-flow
            self.hot.fill_(1.0)
        flagged = p[p > self.threshold]  # HAZARD: dynamic-shape
        self.flag_score.copy_(flagged.sum())
        self.verdict.copy_(p.masked_fill(p <= self.threshold, 0.0))  # CLEAN: masked_fill keeps the batch shape
        return p

    @torch.autocast("cuda", dtype=torch.float16)  # HAZARD: autocast-cache
    @torch.no_grad()
    def _capture(self, hw):
        x = torch.zeros(self.batch, 1, *hw, device=self.device)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._screen(x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool):
            out = self._screen(x)
        self.graphs[hw], self.io[hw] = g, (x, out)

    @torch.no_grad()
    def add_bucket(self, hw):
        # a new phone sensor size showed up in the upload logs
        x = torch.zeros(self.batch, 1, *hw, device=self.device)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool):  # HAZARD: api-misuse
            out = self._screen(x)
        self.graphs[hw], self.io[hw] = g, (x, out)

    @torch.no_grad()
    def scan(self, luma_batch):
        hw = tuple(luma_batch.shape[-2:])
        if hw not in self.graphs:
            self.add_bucket(hw)
        x, p = self.io[hw]
        x.copy_(luma_batch)  # CLEAN: copy_ into the static input
        self.graphs[hw].replay()
        return p.clone(), self.verdict.clone()
