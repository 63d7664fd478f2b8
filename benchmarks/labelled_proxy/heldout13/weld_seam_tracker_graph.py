"""Laser-line seam tracking for a robotic MAG welding cell.

The profile sensor delivers 1280-point height profiles at 500 Hz; a small 1D CNN
locates the groove root, which is mapped to the tool frame with the hand-eye
calibration and sent to the robot controller as a path correction.
"""
import numpy as np
import torch
import torch.nn as nn


class GrooveNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv1d(1, 32, 9, padding=4), nn.ReLU(),
            nn.Conv1d(32, 32, 9, padding=4), nn.ReLU(),
            nn.Conv1d(32, 1, 1),
        )

    def forward(self, prof):
        return self.body(prof).squeeze(1)  # logits over profile points


class SeamTracker:
    def __init__(self, net, hand_eye: np.ndarray, n_pts=1280, device="cuda"):
        self.dev = device
        self.net = net.to(device).eval()
        self.hand_eye_np = hand_eye.astype(np.float32)  # 3x4 sensor->TCP from the calibration file
        self.cal_pinned = torch.from_numpy(self.hand_eye_np[:, :3].copy()).pin_memory()
        self.static_cal = torch.zeros(3, 3, device=device)
        self.profile = torch.zeros(1, 1, n_pts, device=device)
        self.x_mm = torch.linspace(-40.0, 40.0, n_pts, device=device)
        self.stream = torch.cuda.Stream()
        self.viz_stream = torch.cuda.Stream()
        self.graph = torch.cuda.CUDAGraph()

    def _locate(self):
        self.static_cal.copy_(self.cal_pinned, non_blocking=True)  # CLEAN: H2D copy from pinned memory is captured
        logits = self.net(self.profile)
        w = torch.softmax(logits * 4.0, dim=-1)
        root_x = (w * self.x_mm).sum(-1)  # sub-point groove root
        root_z = (w * self.profile[:, 0]).sum(-1)
        seam_col = torch.argmax(logits, dim=-1)
        off = torch.as_tensor(self.hand_eye_np[:, 3], device=self.dev)  # HAZARD: pinned-memory
        p = torch.stack([root_x, torch.zeros_like(root_x), root_z], -1) @ self.static_cal.T + off
        confident = w.max(-1).values.unsqueeze(-1) > 0.05
        corr = torch.where(confident, p, torch.zeros_like(p))  # CLEAN: torch.where instead of a host branch
        with torch.cuda.stream(self.viz_stream):  # HAZARD: stream
            self.overlay = self.profile[0, 0].clone()
        edge = int(seam_col.max())  # HAZARD: host-sync
        return corr, edge

    @torch.no_grad()
    def capture(self):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            with torch.cuda.stream(self.stream):
                for _ in range(3):
                    self._locate()
            torch.cuda.current_stream().wait_stream(self.stream)
            with torch.cuda.graph(self.graph, stream=self.stream):
                self.correction, _ = self._locate()

    def on_profile(self, heights_mm: torch.Tensor):
        self.profile[0, 0].copy_(heights_mm)  # CLEAN: in-place copy into the static input
        self.graph.replay()
        return self.correction


if __name__ == "__main__":
    hand_eye = np.hstack([np.eye(3), np.array([[0.0], [12.5], [210.0]])])
    tracker = SeamTracker(GrooveNet(), hand_eye)
    tracker.capture()
    for k in range(2000):  # 4 s of welding
        x = torch.linspace(-40, 40, 1280, device="cuda")
        groove = -3.0 * torch.exp(-((x - 0.01 * k) ** 2) / 4.0)
        corr = tracker.on_profile(groove + 0.05 * torch.randn_like(groove))
    print("last correction (mm):", corr.cpu().numpy().round(3))  # CLEAN: host read after the replay, outside capture
