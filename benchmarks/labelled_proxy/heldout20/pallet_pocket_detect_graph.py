"""Autonomous forklift perception: pallet-pocket detection on the fork-camera stream.

One `CameraGraphRunner` per camera.  The online calibration service refines the focal
lengths while the truck drives; OTA model updates arrive through `swap_model`.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class PocketNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(),
                                      nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU())
        self.heat = nn.Conv2d(64, 2, 1)  # left / right pocket centre heatmaps
        self.depth = nn.Conv2d(64, 1, 1)

    def forward(self, img):
        f = self.backbone(img)
        return self.heat(f), F.softplus(self.depth(f))


class CameraGraphRunner:
    def __init__(self, cam_id, net, undistort_map_np, fx, fy, cx, cy, hw=(480, 640)):
        self.cam_id = cam_id
        self.net = net.cuda().eval()
        self.undistort_np = undistort_map_np  # [H, W, 2] sampling grid from the factory calibration
        self.fx, self.fy, self.cx, self.cy = fx, fy, cx, cy
        self.static_img = torch.zeros(1, 3, *hw, device="cuda")
        self.stream = torch.cuda.Stream()
        self.graph = torch.cuda.CUDAGraph()
        self.tta_gen = torch.Generator(device="cuda")
        self.tta_gen.manual_seed(cam_id)
        self.telemetry = {}

    @torch.no_grad()
    def _detect(self, img):
        grid = torch.from_numpy(self.undistort_np).cuda()  # HAZARD: pinned-memory
        img = F.grid_sample(img, grid.unsqueeze(0), align_corners=False)
        bright = 1.0 + 0.1 * torch.rand(1, device="cuda", generator=self.tta_gen)  # HAZARD: rng
        heat, depth = self.net(img * bright)
        w = heat.shape[-1]
        score, idx = heat.flatten(2).max(-1)  # [1, 2]
        v, u = (idx // w).float() * 4, (idx % w).float() * 4
        z = depth.flatten(2).gather(-1, idx.unsqueeze(1)).squeeze(1)  # CLEAN: gather with a CUDA index tensor
        self.telemetry["pocket_px"] = idx[0].tolist()  # HAZARD: host-sync
        fx, fy = self.fx, self.fy  # HAZARD: python-scalar
        xyz = torch.stack([(u - self.cx) * z / fx, (v - self.cy) * z / fy, z], dim=-1)
        return xyz, torch.sigmoid(score)

    def capture(self):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            for _ in range(3):
                self._detect(self.static_img)
        torch.cuda.current_stream().wait_stream(self.stream)
        with torch.cuda.graph(self.graph, stream=self.stream):  # HAZARD: api-misuse
            self.static_xyz, self.static_conf = self._detect(self.static_img)

    def swap_model(self, state_dict):
        # OTA update: load the new weights, then re-capture so the graph sees them
        self.net.load_state_dict(state_dict)
        self.capture()

    def recalibrate(self, fx: float, fy: float):
        # the principal point is fixed by the mount; only the focal lengths drift
        self.fx, self.fy = fx, fy

    def on_frame(self, img):
        self.static_img.copy_(img, non_blocking=True)  # CLEAN: in-place refresh of the captured input
        self.graph.replay()
        return self.static_xyz[0].cpu(), self.static_conf[0].cpu()  # CLEAN: host read after the replay


def drive_loop(runner: CameraGraphRunner, frames, calib_updates, plc):
    runner.capture()
    for i, img in enumerate(frames):
        if i in calib_updates:
            runner.recalibrate(*calib_updates[i])
        xyz, conf = runner.on_frame(img)
        if float(conf.min()) > 0.6:
            plc.send_fork_target(cam=runner.cam_id, left=xyz[0].tolist(), right=xyz[1].tolist())
