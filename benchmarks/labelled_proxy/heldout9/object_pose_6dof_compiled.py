"""6-DoF object pose estimation for bin picking (coarse regression + render-free refinement).

A message bus delivers RGB-D frames and calibration updates; handlers are looked up with
getattr. The coarse and refine stages are compiled with options picked from a profile table.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PROFILES = {"cell": {"mode": "reduce-overhead"}, "lab": {"mode": "max-autotune-no-cudagraphs"}}


def rot6d_to_matrix(r6):
    a, b = F.normalize(r6[..., :3], dim=-1), r6[..., 3:]
    b = F.normalize(b - (a * b).sum(-1, keepdim=True) * a, dim=-1)
    return torch.stack([a, b, torch.cross(a, b, dim=-1)], dim=-1)


class PoseNet(nn.Module):
    def __init__(self, c=64):
        super().__init__()
        self.register_buffer("K_inv", torch.eye(3))
        self.backbone = nn.Sequential(nn.Conv2d(4, c, 5, 2, 2), nn.ReLU(), nn.Conv2d(c, 2 * c, 3, 2, 1), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.rot = nn.Linear(2 * c, 6)
        self.uvz = nn.Linear(2 * c, 3)

    def forward(self, rgbd):
        f = self.backbone(rgbd)
        uvz = self.uvz(f)
        ray = (self.K_inv @ torch.cat([uvz[:, :2], torch.ones_like(uvz[:, :1])], -1)[..., None]).squeeze(-1)
        return rot6d_to_matrix(self.rot(f)), ray * uvz[:, 2:].exp()


class Refiner(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(9 + 3 + 4 * 16, 128), nn.ReLU(), nn.Linear(128, 9))
        self.register_buffer("ident6", torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 0.0]))

    def forward(self, rgbd, R, t):
        patch = F.adaptive_avg_pool2d(rgbd, 4).flatten(1)
        d = self.mlp(torch.cat([R.flatten(1), t, patch], -1))
        return R @ rot6d_to_matrix(d[:, :6] + self.ident6), t + 0.01 * d[:, 6:]


class PoseService:
    def __init__(self, posenet, refiner, profile="cell"):
        self.posenet, self.refiner = posenet.cuda().eval(), refiner.cuda().eval()
        self.latency_ms = []
        opts = PROFILES[profile]
        for stage in ("coarse", "refine"):
            setattr(self, stage, torch.compile(getattr(self, "_" + stage), **opts))

    def _coarse(self, rgbd):
        self.t_start = time.perf_counter()  # HAZARD: host-code
        return self.posenet(rgbd)

    def _refine(self, rgbd, R, t):
        for _ in range(3):
            R, t = self.refiner(rgbd, R, t)
        return R, t

    def handle(self, msg):
        return getattr(self, "on_" + msg["type"])(msg)

    @torch.no_grad()
    def on_frame(self, msg):
        rgbd = msg["rgbd"]
        R0, t0 = self.coarse(rgbd)
        R, t = self.refine(rgbd, R0.clone(), t0.clone())  # CLEAN: coarse outputs cloned before the next compiled call
        shift_mm = 1e3 * (t - t0).norm(dim=-1)  # HAZARD: static-address
        self.latency_ms.append(1e3 * (time.perf_counter() - self.t_start))  # CLEAN: host timing in eager code
        return R.clone(), t.clone(), shift_mm

    def on_calibration(self, msg):
        K = torch.as_tensor(msg["K"], dtype=torch.float32, device="cuda")
        self.posenet.K_inv = torch.linalg.inv(K)  # HAZARD: static-address

    def on_tool_offset(self, msg):
        self.posenet.K_inv.copy_(torch.linalg.inv(torch.as_tensor(msg["K"], dtype=torch.float32, device="cuda")))  # CLEAN: in-place update keeps the buffer address


if __name__ == "__main__":
    svc = PoseService(PoseNet(), Refiner())
    K = [[615.0, 0, 320.0], [0, 615.0, 240.0], [0, 0, 1.0]]
    svc.handle({"type": "tool_offset", "K": K})
    for i in range(300):
        if i == 150:
            svc.handle({"type": "calibration", "K": [[612.0, 0, 322.0], [0, 612.0, 238.0], [0, 0, 1.0]]})
        R, t, shift = svc.handle({"type": "frame", "rgbd": torch.rand(8, 4, 480, 640, device="cuda")})
    print(t[0].tolist(), float(shift.mean()))
