"""Parcel dimensioning at the induction belt of a sorting hub.

A top-down depth camera sees each parcel as it passes the scan arch. A small
CNN cleans the raw depth (multipath, black shrink-wrap dropouts) and a box head
regresses length / width; height comes from the belt tare. The hub bills
dimensional weight from the result. One CUDA graph per camera resolution,
all in one memory pool.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DIM_DIVISOR_CM3_PER_KG = 5000.0


class DepthRefiner(nn.Module):
    def __init__(self, ch=32):
        super().__init__()
        self.enc = nn.Sequential(
            nn.Conv2d(2, ch, 3, padding=1), nn.ReLU(),
            nn.Conv2d(ch, ch, 3, padding=1, stride=2), nn.ReLU(),
            nn.Conv2d(ch, ch, 3, padding=1), nn.ReLU(),
        )
        self.dec = nn.Conv2d(ch, 1, 3, padding=1)
        self.box = nn.Sequential(nn.AdaptiveAvgPool2d(8), nn.Flatten(), nn.Linear(ch * 64, 2))

    def forward(self, depth_mm, valid):
        h = self.enc(torch.cat([depth_mm / 1000.0, valid], dim=1))
        resid = F.interpolate(self.dec(h), size=depth_mm.shape[-2:], mode="bilinear", align_corners=False)
        return depth_mm + 10.0 * resid, 100.0 * F.softplus(self.box(h))


class Dimensioner:
    RESOLUTIONS = [(240, 320), (480, 640)]

    def __init__(self, model, intrinsics, belt_height_mm=1200.0):
        self.model = model.cuda().eval()
        self.K = torch.from_numpy(intrinsics.astype(np.float32)).cuda()  # CLEAN: pageable upload once in __init__, outside any capture
        self.tare_mm = belt_height_mm
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.bufs, self.outs = {}, {}, {}

    def set_tare(self, belt_height_mm):
        # the belt is re-levelled after maintenance; called while the line is running
        self.tare_mm = belt_height_mm

    def _measure(self, depth, valid):
        h, w = depth.shape[-2:]
        res_scale = torch.from_numpy(np.array([w / 640.0, h / 480.0], np.float32)).to("cuda")  # HAZARD: pinned-memory
        depth = torch.where(valid > 0, depth, torch.zeros_like(depth))  # CLEAN: fixed-shape select instead of masking
        refined, box_cm = self.model(depth, valid)
        tare = self.tare_mm  # HAZARD: python-scalar
        height_mm = (tare - refined).clamp(min=0.0)
        on_parcel = (height_mm > 15.0) & (valid > 0)
        top = height_mm[on_parcel]  # HAZARD: dynamic-shape
        h_cm = top.quantile(0.9) / 10.0
        fx, fy = self.K[0, 0] * res_scale[0], self.K[1, 1] * res_scale[1]
        px_area_cm2 = (tare / fx) * (tare / fy) / 100.0
        footprint_cm2 = on_parcel.float().sum() * px_area_cm2
        dim_weight = footprint_cm2 * h_cm / DIM_DIVISOR_CM3_PER_KG
        return torch.stack([box_cm[0, 0], box_cm[0, 1], h_cm, dim_weight])

    def capture_all(self):
        for h, w in sorted(self.RESOLUTIONS, reverse=True):
            bufs = {"depth": torch.full((1, 1, h, w), 1500.0, device="cuda"),
                    "valid": torch.ones(1, 1, h, w, device="cuda")}
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side), torch.no_grad():
                for _ in range(3):
                    self._measure(bufs["depth"], bufs["valid"])
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.no_grad(), torch.cuda.graph(g, pool=self.pool):
                out = self._measure(bufs["depth"], bufs["valid"])
            self.graphs[(h, w)], self.bufs[(h, w)], self.outs[(h, w)] = g, bufs, out

    def measure(self, depth_np, valid_np):
        res = depth_np.shape
        depth = torch.from_numpy(depth_np).pin_memory().cuda(non_blocking=True)
        valid = torch.from_numpy(valid_np.astype(np.float32)).pin_memory().cuda(non_blocking=True)
        bufs = self.bufs[res]
        bufs["depth"].copy_(depth[None, None])  # CLEAN: copied into the captured input
        bufs["valid"] = valid[None, None]  # HAZARD: static-address
        self.graphs[res].replay()
        return self.outs[res].clone()  # CLEAN: cloned before the next parcel's replay


if __name__ == "__main__":
    K = np.array([[525.0, 0, 319.5], [0, 525.0, 239.5], [0, 0, 1]])
    dim = Dimensioner(DepthRefiner(), K)
    dim.capture_all()
    rng = np.random.default_rng(0)
    for i in range(1000):
        res = Dimensioner.RESOLUTIONS[i % 2]
        d = (1200.0 - 300.0 * rng.random(res)).astype(np.float32)
        v = rng.random(res) > 0.05
        l_cm, w_cm, h_cm, dw = dim.measure(d, v).cpu().tolist()  # CLEAN: host read after the replay
        if i == 500:
            dim.set_tare(1195.0)
