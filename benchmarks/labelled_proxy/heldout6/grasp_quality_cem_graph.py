"""Parallel-jaw grasp planning with a GQ-CNN and the cross-entropy method (Dex-Net style).

A depth image is cropped and rotated around each candidate grasp (u, v, angle, depth);
the GQ-CNN scores the crops and CEM refits a Gaussian over the elites. All CEM
iterations for one depth frame are captured as a single CUDA graph.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

N_SAMPLES, N_ELITE, CROP, H, W = 256, 32, 32, 480, 640


class GQCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.im = nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                                nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten())
        self.pose = nn.Sequential(nn.Linear(2, 16), nn.ReLU())
        self.fc = nn.Sequential(nn.Linear(64 * 8 * 8 + 16, 256), nn.ReLU(), nn.Linear(256, 1))

    def forward(self, crops, pose):
        return torch.sigmoid(self.fc(torch.cat([self.im(crops), self.pose(pose)], -1))).squeeze(-1)


def crop_grasps(depth, g):
    n = g.shape[0]
    cos, sin, s = torch.cos(g[:, 2]), torch.sin(g[:, 2]), CROP / W
    theta = torch.stack([torch.stack([cos * s, -sin * s, g[:, 0] * 2 / W - 1], -1),
                         torch.stack([sin * s, cos * s, g[:, 1] * 2 / H - 1], -1)], 1)
    grid = F.affine_grid(theta, (n, 1, CROP, CROP), align_corners=False)
    return F.grid_sample(depth.expand(n, -1, -1, -1), grid, align_corners=False) - g[:, 3].view(-1, 1, 1, 1)


class CEMPlanner:
    def __init__(self, net, intrinsics=(615.0, 615.0, 320.0, 240.0), gripper_width_m=0.05):
        self.net = net.eval()
        self.cem_iters = 3
        self.intr_np = np.asarray(intrinsics, dtype=np.float32)
        self.gripper_width_m = gripper_width_m
        self.static_depth = torch.zeros(1, 1, H, W, device="cuda")
        self.static_mu = torch.tensor([W / 2, H / 2, 0.0, 0.6], device="cuda")
        self.static_std = torch.tensor([W / 6, H / 6, 1.2, 0.05], device="cuda")
        self.static_best = torch.zeros(1, 4, device="cuda")
        self.gen = torch.Generator(device="cuda")
        self.approach_gen = torch.Generator(device="cuda")
        self.graph = torch.cuda.CUDAGraph()
        self.graph.register_generator_state(self.gen)
        self.best_q = 0.0

    def _plan(self):
        mu, std = self.static_mu.clone(), self.static_std.clone()
        intr = torch.from_numpy(self.intr_np).to("cuda", non_blocking=True)  # HAZARD: pinned-memory
        for _ in range(self.cem_iters):  # HAZARD: python-scalar
            cand = mu + std * torch.randn(N_SAMPLES, 4, device="cuda", generator=self.gen)  # CLEAN: generator registered with the graph
            tilt = np.random.uniform(-0.1, 0.1)  # HAZARD: host-code
            depth_off = 0.01 * torch.rand(N_SAMPLES, device="cuda", generator=self.approach_gen)  # HAZARD: rng
            cand = torch.stack([cand[:, 0], cand[:, 1], cand[:, 2] + tilt, cand[:, 3] + depth_off], -1)
            width_px = self.gripper_width_m * intr[0] / cand[:, 3].clamp_min(0.2)
            q = self.net(crop_grasps(self.static_depth, cand), torch.stack([cand[:, 3], width_px / W], -1))
            elite = cand[q.topk(N_ELITE).indices]  # CLEAN: topk keeps a fixed elite count
            mu, std = elite.mean(0), elite.std(0) + 1e-3
        self.static_best.copy_(cand[q.topk(1).indices])
        self.best_q = q.max().item()  # HAZARD: host-sync

    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._plan()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self._plan()

    def set_latency_budget(self, ms):
        self.cem_iters = 2 if ms < 30 else 5

    @torch.no_grad()
    def plan(self, depth_m):
        host = torch.from_numpy(depth_m).pin_memory()
        self.static_depth.copy_(host.view(1, 1, H, W), non_blocking=True)  # CLEAN: pinned copy before replay
        self.graph.replay()
        return self.static_best.clone()


if __name__ == "__main__":
    planner = CEMPlanner(GQCNN().cuda())
    planner.capture()
    planner.set_latency_budget(25)
    for _ in range(5):
        grasp = planner.plan(np.random.uniform(0.5, 0.7, (H, W)).astype(np.float32))
        print("grasp", grasp.squeeze(0).tolist(), "q", planner.best_q)
