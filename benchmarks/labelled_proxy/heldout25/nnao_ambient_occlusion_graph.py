"""Neural screen-space ambient occlusion (NNAO) pass for the deferred renderer.

Ported from the GLSL prototype: the G-buffer (view-space depth + normals) comes in every
frame, a small conv net predicts AO, and the result is blurred and composited on the HUD.
One CUDA graph per render resolution, all graphs share one memory pool.
"""
import logging

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("render.nnao")


def make_hemisphere(n, seed=7):
    rng = np.random.RandomState(seed)
    v = rng.normal(size=(n, 3)).astype(np.float32)
    v[:, 2] = np.abs(v[:, 2])
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v * rng.uniform(0.1, 1.0, size=(n, 1)).astype(np.float32)


class AONet(nn.Module):
    def __init__(self, n_samples=16):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(4 + n_samples, 32, 3, padding=1), nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=2, dilation=2), nn.ReLU(),
            nn.Conv2d(32, 1, 3, padding=1), nn.Sigmoid())

    def forward(self, feats):
        return self.body(feats)


class NNAORunner:
    def __init__(self, net, cfg):
        self.net = net.cuda().eval()
        self.cfg = cfg
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.static = {}, {}
        self.hemisphere_np = make_hemisphere(cfg["samples"])
        jitter = np.random.RandomState(3).rand(4, 4).astype(np.float32)
        self.jitter_host = torch.from_numpy(jitter).pin_memory()  # CLEAN: pinned once at init, outside any capture
        self.jitter_dev = torch.empty(4, 4, device="cuda")

    def set_quality(self, radius):
        self.cfg["radius"] = radius          # settings menu; graphs are kept

    @torch.no_grad()
    def _ao(self, depth, normals):
        radius = self.cfg["radius"]  # HAZARD: python-scalar
        kernel = torch.from_numpy(self.hemisphere_np).cuda()  # HAZARD: pinned-memory
        self.jitter_dev.copy_(self.jitter_host, non_blocking=True)  # CLEAN: copy from pinned host memory is recorded
        proj = torch.einsum("bchw,sc->bshw", normals, kernel) * radius
        occl = torch.sigmoid((proj - depth) * 8.0)
        feats = torch.cat([depth, normals, occl], dim=1)
        ao = self.net(feats)
        tile = self.jitter_dev.repeat(ao.shape[-2] // 4, ao.shape[-1] // 4)
        ao = F.avg_pool2d(ao + 0.02 * tile, 3, stride=1, padding=1)
        far = depth >= self.cfg["far_plane"]
        ao = torch.where(far, torch.ones_like(ao), ao)  # CLEAN: device-side select, no host read
        log.debug(f"nnao mean occlusion {ao.mean():.3f}")  # HAZARD: host-sync
        return ao

    def _capture(self, key):
        h, w = key
        st = {"depth": torch.zeros(1, 1, h, w, device="cuda"),
              "normals": torch.zeros(1, 3, h, w, device="cuda")}
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._ao(st["depth"], st["normals"])
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool):  # CLEAN: warmed up on a side stream, own capture stream
            st["ao"] = self._ao(st["depth"], st["normals"])
        self.graphs[key], self.static[key] = g, st

    def render(self, depth, normals):
        key = tuple(depth.shape[-2:])
        if key not in self.graphs:
            self._capture(key)
        st = self.static[key]
        st["depth"] = depth  # HAZARD: static-address
        st["normals"].copy_(normals)  # CLEAN: in-place copy into the static input
        self.graphs[key].replay()
        return st["ao"]


def frame_loop(runner, gbuffers, hud):
    for depth, normals in gbuffers:
        ao = runner.render(depth, normals)
        hud.set("ao", ao.mean().item())  # CLEAN: read after replay, eager code
    runner.set_quality(radius=0.75)
