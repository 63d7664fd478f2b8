"""Terrain classification and traversability cost for a Mars rover (AI4Mars classes).

NavCam images are segmented into soil / bedrock / sand / big rock, corrected for the sun
elevation, and turned into a cost map for the local path planner. A small GraphRunner base
class owns warm-up and capture; the terrain runner implements the body.
"""
import logging

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("terrain")
CLASS_COST = (1.0, 0.6, 4.0, 50.0)          # soil, bedrock, sand, big rock


class GraphRunner:
    def __init__(self):
        self.graphs, self.inputs, self.outputs = {}, {}, {}
        self.pool = torch.cuda.graph_pool_handle()

    def _alloc(self, key):
        raise NotImplementedError

    def _body(self, *inputs):
        raise NotImplementedError

    @torch.no_grad()
    def warm_and_capture(self, key, iters=3):
        inputs = self._alloc(key)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(iters):
                self._body(*inputs)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool):
            out = self._body(*inputs)
        self.graphs[key], self.inputs[key], self.outputs[key] = g, inputs, out


class TerrainCostRunner(GraphRunner):
    def __init__(self, segnet, attitude_rpy):
        super().__init__()
        self.segnet = segnet.cuda().eval()
        self.attitude_np = np.asarray(attitude_rpy, dtype=np.float32)   # from the IMU, per drive step
        self.sun_elevation_deg = 35.0
        self.mc_gen = torch.Generator(device="cuda").manual_seed(5)
        self.class_cost = torch.tensor(CLASS_COST, device="cuda").view(1, 4, 1, 1)  # CLEAN: uploaded once in __init__
        self.cost_map_host = None

    def _alloc(self, key):
        h, w = key
        return (torch.zeros(1, 1, h, w, device="cuda"),)

    def _body(self, img):
        elev = self.sun_elevation_deg  # HAZARD: python-scalar
        img = img / max(np.sin(np.deg2rad(elev)), 0.2)
        noise = torch.randn(img.shape, device=img.device, generator=self.mc_gen)  # HAZARD: rng
        probs = self.segnet(torch.cat([img, 0.02 * noise], 1)).softmax(1)
        cost = (probs * self.class_cost).sum(1, keepdim=True)
        att = torch.from_numpy(self.attitude_np).cuda()  # HAZARD: pinned-memory
        tilt = att[:2].abs().sum()
        cost = torch.where(probs[:, 2:3] > 0.5, cost * (1.0 + tilt), cost)  # CLEAN: torch.where, no host branch
        cost = F.max_pool2d(cost, 5, stride=1, padding=2)
        self.cost_map_host = cost.squeeze().cpu().numpy()  # HAZARD: host-sync
        return cost

    def cost_map(self, navcam):
        key = tuple(navcam.shape[-2:])
        if key not in self.graphs:
            log.info("new NavCam resolution %s, capturing", key)
            inputs = self._alloc(key)
            g = torch.cuda.CUDAGraph()
            with torch.no_grad(), torch.cuda.graph(g, pool=self.pool):  # HAZARD: api-misuse
                out = self._body(*inputs)
            self.graphs[key], self.inputs[key], self.outputs[key] = g, inputs, out
        self.inputs[key][0].copy_(navcam)  # CLEAN: copy_ into the static input
        self.graphs[key].replay()
        return self.outputs[key].clone()


if __name__ == "__main__":
    segnet = nn.Sequential(nn.Conv2d(2, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 4, 1))
    runner = TerrainCostRunner(segnet, attitude_rpy=(0.02, -0.05, 1.3))
    runner.warm_and_capture((512, 512))
    for sol_step in range(50):
        runner.sun_elevation_deg = 20.0 + sol_step
        img = torch.rand(1, 1, 512, 512, device="cuda")
        if sol_step % 10 == 9:
            img = torch.rand(1, 1, 1024, 1024, device="cuda")
        cmap = runner.cost_map(img)
