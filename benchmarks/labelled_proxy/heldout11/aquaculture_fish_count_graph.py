"""Salmon counting in sea-cage net pens from four underwater cameras per pen group.

A density-map CNN (CSRNet-like) runs in one of two modes picked by name: "_dense" in daylight
and "_tiled" (2x upsampled) at night. Graphs are captured per (mode, shape) on first use
and replayed for every 5-minute census.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class DensityNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.front = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                   nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.back = nn.Sequential(nn.Conv2d(128, 64, 3, padding=2, dilation=2), nn.ReLU(),
                                  nn.Conv2d(64, 1, 1), nn.ReLU())

    def forward(self, x):
        return F.interpolate(self.back(self.front(x)), size=x.shape[-2:], mode="bilinear") / 16.0


class PenConfig:
    def __init__(self, net_mask, depth_scale, cam_to_pen, max_count=60000):
        self.net_mask = net_mask                             # bool (H, W): net mesh / rope pixels
        self.depth_scale = depth_scale                       # np.ndarray (4,), from the sonar survey
        self.cam_to_pen = cam_to_pen                         # list[int], one pen id per camera
        self.max_count = max_count


class FishCounter:
    def __init__(self, net, cfg, n_pens=2):
        self.net = net.cuda().eval()
        self.cfg, self.n_pens = cfg, n_pens
        self.net_mask = cfg.net_mask.cuda()
        self.cam_order = torch.tensor([3, 2, 1, 0], device="cuda")
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.io = {}, {}

    def _post(self, dens):
        dens = dens.masked_fill(self.net_mask, 0.0)  # CLEAN: masked_fill keeps the shape static
        scale = torch.from_numpy(self.cfg.depth_scale).cuda()  # HAZARD: pinned-memory
        per_cam = dens.sum((1, 2, 3)) * scale
        pens = torch.tensor(self.cfg.cam_to_pen, device="cuda")  # HAZARD: host-sync
        per_pen = torch.zeros(self.n_pens, device="cuda").index_add_(0, pens, per_cam)
        if per_pen.max() > self.cfg.max_count:  # HAZARD: dynamic-control-flow
            per_pen = per_pen.clamp_max(self.cfg.max_count)
        return per_pen

    @torch.no_grad()
    def _dense(self, x):
        x = x.index_select(0, self.cam_order)  # CLEAN: index_select with a CUDA index tensor
        return self._post(self.net(x))

    @torch.no_grad()
    def _tiled(self, x):
        x2 = F.interpolate(x, scale_factor=2.0, mode="bilinear")
        return self._post(F.avg_pool2d(self.net(x2), 2) * 4.0)

    def census(self, frames, mode="_dense"):
        key = (mode, tuple(frames.shape))
        if key not in self.graphs:
            fn = getattr(self, mode)
            static = frames.clone()
            if mode == "_dense":                             # the night mode skips warm-up to keep start-up short
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(3):
                        fn(static)
                torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):  # HAZARD: api-misuse
                out = fn(static)
            self.graphs[key], self.io[key] = g, (static, out)
        static, out = self.io[key]
        static.copy_(frames)
        self.graphs[key].replay()
        return out.cpu().tolist()  # CLEAN: host read after the replay


if __name__ == "__main__":
    import numpy as np
    cfg = PenConfig(torch.zeros(360, 640, dtype=torch.bool), np.array([1.0, 1.1, 0.9, 1.2], np.float32), [0, 0, 1, 1])
    counter = FishCounter(DensityNet(), cfg)
    day = counter.census(torch.rand(4, 3, 360, 640, device="cuda"), "_dense")
    night = counter.census(torch.rand(4, 3, 360, 640, device="cuda"), "_tiled")
