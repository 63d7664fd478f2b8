"""PSMNet-lite stereo matching from a small model zoo, served for one rectified resolution through a
capture_begin/capture_end runner (rectification by grid_sample inside the graph)."""
import functools

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

class FeatureNet(nn.Module):
    def __init__(self, c=32):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, c, 3, 2, 1), nn.ReLU(inplace=True),
            nn.Conv2d(c, c, 3, 2, 1), nn.ReLU(inplace=True),
            nn.Conv2d(c, c, 3, 1, 1))

    def forward(self, x):
        return self.body(x)

class StereoNet(nn.Module):
    def __init__(self, max_disp=192, feat_ch=32, refine=True):
        super().__init__()
        self.max_disp = max_disp
        self.feature = FeatureNet(feat_ch)
        self.agg = nn.Sequential(nn.Conv3d(2 * feat_ch, 32, 3, 1, 1), nn.ReLU(inplace=True),
                                 nn.Conv3d(32, 1, 3, 1, 1))
        self.refine = nn.Conv2d(4, 1, 3, 1, 1) if refine else None
        self.refine_stream = torch.cuda.Stream()

    @staticmethod
    def cost_volume(fl, fr, d4):
        b, c, h, w = fl.shape
        cost = fl.new_zeros(b, 2 * c, d4, h, w)
        for d in range(d4):
            cost[:, :c, d, :, d:] = fl[:, :, :, d:]
            cost[:, c:, d, :, d:] = fr[:, :, :, : w - d]
        return cost

    def forward(self, left, right):
        d4 = self.max_disp // 4  # HAZARD: python-scalar
        cost = self.cost_volume(self.feature(left), self.feature(right), d4)
        prob = F.softmax(-self.agg(cost).squeeze(1), dim=1)
        levels = torch.arange(d4, device=prob.device, dtype=prob.dtype).view(1, -1, 1, 1)
        disp = (prob * levels).sum(1, keepdim=True) * 4
        disp = F.interpolate(disp, scale_factor=4, mode="bilinear", align_corners=False)
        if self.refine is not None:
            with torch.cuda.stream(self.refine_stream):  # HAZARD: stream
                disp = disp + self.refine(torch.cat([disp, left], 1))
        return disp

MODEL_ZOO = {
    "psm-lite-96": functools.partial(StereoNet, max_disp=96, feat_ch=16, refine=False),
    "psm-lite-192": functools.partial(StereoNet, max_disp=192, feat_ch=32, refine=False),
    "psm-kitti": functools.partial(StereoNet, max_disp=192, feat_ch=32, refine=True),
}

def build_stereo(name, **overrides):
    return MODEL_ZOO[name](**overrides)

class StereoGraphRunner:
    def __init__(self, model, height, width, rect_map_path=None):
        self.model = model.cuda().eval()
        self.side = torch.cuda.Stream()
        self.left = torch.zeros(1, 3, height, width, device="cuda")
        self.right = torch.zeros_like(self.left)
        grid = np.load(rect_map_path) if rect_map_path else np.zeros((1, height, width, 2), np.float32)
        self.rect_grid = torch.from_numpy(grid)
        self.graph = torch.cuda.CUDAGraph()
        self.last_valid_ratio = 1.0

    def _run(self):
        grid = self.rect_grid.cuda(non_blocking=True)  # HAZARD: pinned-memory
        right = F.grid_sample(self.right, grid, align_corners=False)  # CLEAN: grid_sample is capturable
        disp = self.model(self.left, right)
        invalid = disp < 0.5
        disp[invalid] = 0.0  # CLEAN: bool-mask assignment of a scalar is capturable
        self.last_valid_ratio = (disp > 0).float().mean().item()  # HAZARD: host-sync
        return disp

    @torch.no_grad()
    def capture(self):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            for _ in range(3):
                self._run()
            self.graph.capture_begin()  # CLEAN: capture_begin on a forked side stream after warm-up
            self.static_disp = self._run()
            self.graph.capture_end()
        torch.cuda.current_stream().wait_stream(self.side)

    def set_near_field(self, enabled):
        self.model.max_disp = 96 if enabled else 192

    @torch.no_grad()
    def __call__(self, left, right):
        self.left.copy_(left)  # CLEAN: copy_ into the captured inputs
        self.right.copy_(right)
        self.graph.replay()
        return self.static_disp.clone()

if __name__ == "__main__":
    runner = StereoGraphRunner(build_stereo("psm-kitti"), 384, 1248)
    runner.capture()
    for i in range(100):
        left = torch.rand(1, 3, 384, 1248, device="cuda")
        right = torch.rand(1, 3, 384, 1248, device="cuda")
        runner.set_near_field(i % 20 >= 10)
        disp = runner(left, right)
