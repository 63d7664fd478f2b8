"""Hand tracking for a VR headset: 21-keypoint regression from the two tracking cameras.

Frames are double-buffered: the camera thread fills the back buffer while the front buffer is
being inferred. One graph per number of tracked hands (1 or 2) shares a memory pool. The
filtered keypoints go to the compositor through a One-Euro filter on the CPU.
"""
import threading

import torch
import torch.nn as nn

K = 21
RES = 160


class HandNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(2, 32, 3, 2, 1), nn.ReLU(),
                                      nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU(),
                                      nn.Conv2d(64, K + 1, 1))

    def forward(self, crops):
        out = self.backbone(crops)
        return out[:, :K], out[:, K].mean(dim=(1, 2)).sigmoid()


class HandTracker:
    def __init__(self, net, dev="cuda"):
        self.dev = dev
        self.net = net.to(dev).eval()
        self.front = torch.zeros(2, 2, RES, RES, device=dev)
        self.back = torch.zeros(2, 2, RES, RES, device=dev)
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.outs = {}, {}
        self.tta_gen = torch.Generator(device=dev)
        self.lock = threading.Lock()

    def _forward(self, n):
        crops = self.front[:n]
        gain = 1.0 + 0.05 * torch.rand(n, 1, 1, 1, device=self.dev, generator=self.tta_gen)  # HAZARD: rng
        heat, vis = self.net(crops * gain)
        flat = heat.flatten(2).softmax(-1)
        grid = torch.arange(heat.shape[-1] ** 2, device=self.dev)
        xy = torch.stack([(flat * (grid % heat.shape[-1])).sum(-1), (flat * (grid // heat.shape[-1])).sum(-1)], -1)
        conf = flat.amax(-1)
        self.visible_flags = vis.gt(0.3).tolist()  # HAZARD: host-sync
        return xy, conf

    def _capture(self, n, warm=True):
        g = torch.cuda.CUDAGraph()
        if warm:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s), torch.no_grad():
                for _ in range(3):
                    self._forward(n)
            torch.cuda.current_stream().wait_stream(s)
        with torch.no_grad(), torch.cuda.graph(g, pool=self.pool):  # HAZARD: api-misuse
            self.outs[n] = self._forward(n)
        self.graphs[n] = g

    def start(self):
        self._capture(1)

    def infer(self, n_hands):
        if n_hands not in self.graphs:
            self._capture(n_hands, warm=False)  # second hand appears mid-session: captured lazily
        self.graphs[n_hands].replay()
        xy, conf = self.outs[n_hands]
        return xy.clone(), conf.clone()  # CLEAN: cloned before the next replay overwrites them

    def on_frame(self, left, right, n_hands):
        with self.lock:
            self.back[:n_hands, 0].copy_(left)  # CLEAN: in-place write to the back buffer
            self.back[:n_hands, 1].copy_(right)
            self.front, self.back = self.back, self.front  # HAZARD: static-address
        return self.infer(n_hands)

    def keypoints_for_haptics(self, xy, conf, thr):
        strong = xy[conf > thr]  # CLEAN: eager post-processing after replay
        return strong.cpu()


def pinch_strength(xy, conf, thr=0.4):
    tips = xy[:, [4, 8]]  # CLEAN: eager, on a cloned output, outside the region
    return torch.where(conf[:, 8] > thr, (tips[:, 0] - tips[:, 1]).norm(dim=-1), torch.inf)


def confident_points(tracker, n):
    xy, conf = tracker.outs[n]
    return xy[conf > 0.5]  # CLEAN: eager read of the graph output, after replay


class Euro:
    def __init__(self, beta=0.01):
        self.beta, self.prev = beta, None

    def __call__(self, x):
        self.prev = x if self.prev is None else self.prev + (x - self.prev) * self.beta
        return self.prev
