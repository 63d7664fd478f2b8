"""Monocular learned visual odometry for a warehouse AMR (DeepVO-style pose regressor).

Two consecutive grayscale frames go through a FlowNet-like encoder that regresses the
6-DoF relative pose; a photometric residual on sampled pixels is kept as a tracking
quality score. The per-frame step is one CUDA graph.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

H, W = 240, 320
N_SAMPLES = 2048


class PoseNet(nn.Module):
    def __init__(self):
        super().__init__()
        chans = [2, 32, 64, 128, 256, 256]
        self.enc = nn.Sequential(*[nn.Sequential(nn.Conv2d(a, b, 3, stride=2, padding=1), nn.LeakyReLU(0.1))
                                   for a, b in zip(chans[:-1], chans[1:])])
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 128), nn.ReLU(),
                                  nn.Linear(128, 7))                # 3 translation, 3 rotation, 1 inverse depth
        self.register_buffer("pose_scale", torch.tensor([0.01, 0.01, 0.01, 0.001, 0.001, 0.001, 1.0]))

    def forward(self, prev, cur):
        return self.head(self.enc(torch.cat([prev, cur], 1))) * self.pose_scale  # CLEAN: scale is a registered buffer


class VOFrontend:
    def __init__(self, model, K_np, device="cuda"):
        self.model = model.eval().to(device)
        self.K_np = K_np.astype(np.float32)
        self.static_prev = torch.zeros(1, 1, H, W, device=device)
        self.static_cur = torch.zeros(1, 1, H, W, device=device)
        self.sample_gen = torch.Generator(device=device)
        self.sample_gen.manual_seed(7)
        ys, xs = torch.meshgrid(torch.arange(H, device=device), torch.arange(W, device=device), indexing="ij")
        self.pix = torch.stack([xs, ys, torch.ones_like(xs)], 0).reshape(3, -1).float()
        self.trajectory = []
        self.graph = None

    def _photometric(self, pose):
        idx = torch.randint(0, H * W, (N_SAMPLES,), device=pose.device, generator=self.sample_gen)  # HAZARD: rng
        K = torch.from_numpy(self.K_np).cuda()  # HAZARD: pinned-memory
        fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
        p = self.pix[:, idx]
        rays = torch.stack([(p[0] - cx) / fx, (p[1] - cy) / fy, torch.ones_like(p[0])], 0)
        pts = rays / pose[0, 6].clamp_min(1e-3) + pose[0, :3, None]
        proj = K @ pts
        uv = proj[:2] / proj[2:].clamp_min(1e-3)
        grid = torch.stack([uv[0] / (W - 1), uv[1] / (H - 1)], -1) * 2 - 1
        warped = F.grid_sample(self.static_cur, grid.view(1, 1, -1, 2), align_corners=True)
        ref = self.static_prev.flatten()[idx]
        return (warped.flatten() - ref).abs().mean()

    def _step(self):
        pose = self.model(self.static_prev, self.static_cur)
        residual = self._photometric(pose)
        self.trajectory.append(pose[0, :3].tolist())  # HAZARD: host-sync
        return pose, residual

    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_pose, self.static_res = self._step()

    @torch.no_grad()
    def reset(self, first_frame):
        self.static_prev.copy_(first_frame)  # CLEAN: in-place refill of the captured input
        self.static_cur.copy_(first_frame)

    @torch.no_grad()
    def track(self, frame):
        self.static_prev, self.static_cur = self.static_cur, self.static_prev  # HAZARD: static-address
        self.static_cur.copy_(frame, non_blocking=True)
        self.graph.replay()
        quality = self.static_res.item()  # CLEAN: read after replay, outside the graph
        return self.static_pose[0].clone(), quality
