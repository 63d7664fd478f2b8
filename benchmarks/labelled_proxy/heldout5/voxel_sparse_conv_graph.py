"""LiDAR voxel backbone: point scatter into a voxel grid + occupancy-masked 3D convs.

A dense stand-in for submanifold sparse convolution, captured with capture_begin/capture_end.
"""
import numpy as np
import torch
import torch.nn as nn


class MaskedConv3d(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv3d(c_in, c_out, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm3d(c_out)

    def forward(self, x, occ):
        return torch.relu(self.bn(self.conv(x))) * occ  # CLEAN: occupancy applied as a dense mask


class VoxelBackbone(nn.Module):
    def __init__(self, grid=(20, 256, 256), pc_range=(-51.2, -51.2, -5.0, 51.2, 51.2, 3.0), c=16):
        super().__init__()
        D, H, W = grid
        self.grid = grid
        self.register_buffer("lo", torch.tensor(pc_range[:3]))
        self.register_buffer("voxel", (torch.tensor(pc_range[3:]) - torch.tensor(pc_range[:3])) / torch.tensor([W, H, D]))
        self.register_buffer("hi", torch.tensor([W - 1, H - 1, D - 1]))
        self.blocks = nn.ModuleList([MaskedConv3d(4, c), MaskedConv3d(c, c), MaskedConv3d(c, 2 * c)])

    def voxelize(self, pts):  # pts (N, 4): x, y, z, intensity
        D, H, W = self.grid  # CLEAN: grid shape fixed at construction
        ijk = torch.minimum(((pts[:, :3] - self.lo) / self.voxel).long().clamp(min=0), self.hi)
        flat = (ijk[:, 2] * H + ijk[:, 1]) * W + ijk[:, 0]
        uniq, inv = torch.unique(flat, return_inverse=True)  # HAZARD: dynamic-shape
        feat = torch.zeros(uniq.numel(), pts.shape[1], device=pts.device)
        feat = feat.index_reduce_(0, inv, pts, "mean", include_self=False)
        grid = torch.zeros(pts.shape[1], D * H * W, device=pts.device)
        grid[:, uniq] = feat.t()
        occ = (grid.abs().sum(0) > 0).float()
        return grid.view(1, -1, D, H, W), occ.view(1, 1, D, H, W)


class LidarRunner:
    def __init__(self, model, max_points=120_000):
        self.model = model.cuda().eval()
        self.points = torch.zeros(max_points, 4, device="cuda")
        self.graph = torch.cuda.CUDAGraph()
        self.calib = np.eye(4, dtype=np.float32)  # lidar-to-ego extrinsics, reloaded per vehicle

    @torch.no_grad()
    def _forward(self):
        T = torch.from_numpy(self.calib).cuda()  # HAZARD: pinned-memory
        xyz = self.points[:, :3] @ T[:3, :3].t() + T[:3, 3]
        x, occ = self.model.voxelize(torch.cat([xyz, self.points[:, 3:]], 1))
        for blk in self.model.blocks:
            x = blk(x, occ)
        torch.cuda.synchronize()  # HAZARD: host-sync
        return x.amax(dim=2), occ

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._forward()
        torch.cuda.current_stream().wait_stream(s)
        self.graph.capture_begin()  # HAZARD: stream
        self.bev, self.occ = self._forward()
        self.graph.capture_end()

    def infer(self, scan_np):
        n = min(len(scan_np), self.points.shape[0])
        host = torch.from_numpy(scan_np[:n]).pin_memory()
        self.points.fill_(-1000.0)
        self.points[:n].copy_(host, non_blocking=True)  # CLEAN: pinned host copy into the static buffer, outside the graph
        self.graph.replay()
        n_occ = self.occ.sum().item()  # CLEAN: .item() after replay
        return self.bev.clone(), n_occ


if __name__ == "__main__":
    runner = LidarRunner(VoxelBackbone())
    runner.capture()
    scan = np.random.randn(90_000, 4).astype(np.float32) * 20
    bev, n_occ = runner.infer(scan)
    print(bev.shape, n_occ)
