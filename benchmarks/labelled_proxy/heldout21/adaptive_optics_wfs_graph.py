"""1 kHz adaptive-optics loop: Shack-Hartmann frame -> slopes -> learned reconstructor -> DM.

The eager `loop_step` is still used by the bench GUI. `AOLoop` is the CUDA-graph port from
the RTC repo (issue #88: 600 us of launch overhead per frame at 40x40 lenslets).
"""
import numpy as np
import torch
import torch.nn as nn

N_SUB = 40            # 40x40 lenslets
PIX = 8               # pixels per sub-aperture
N_ACT = 41 * 41


class Reconstructor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(2, 64, 3, padding=1), nn.GELU(),
            nn.Conv2d(64, 64, 3, padding=1), nn.GELU(),
            nn.Flatten(), nn.Linear(64 * N_SUB * N_SUB, N_ACT))

    def forward(self, slopes):
        return self.net(slopes)


def centroids(frame):
    # frame (N_SUB*PIX, N_SUB*PIX) -> slopes (1, 2, N_SUB, N_SUB)
    tiles = frame.view(N_SUB, PIX, N_SUB, PIX).permute(0, 2, 1, 3)
    w = tiles.sum(dim=(-1, -2)).clamp_min(1e-6)
    grid = torch.arange(PIX, device=frame.device, dtype=frame.dtype) - (PIX - 1) / 2
    sx = (tiles.sum(-2) * grid).sum(-1) / w
    sy = (tiles.sum(-1) * grid).sum(-1) / w
    return torch.stack([sx, sy])[None]


def loop_step(recon, frame, integ, gain=0.4, leak=0.99):
    # eager version used by the GUI
    integ.mul_(leak).add_(recon(centroids(frame)), alpha=-gain)
    return integ


class AOLoop:
    def __init__(self, recon, subap_mask, dm_offsets, device="cuda"):
        self.recon = recon.to(device).eval()
        self.subap_mask = subap_mask.to(device)          # bool (N_SUB, N_SUB): illuminated lenslets
        self.dm_offsets_np = dm_offsets                   # flat map from the last calibration
        self.loop_gain = 0.3
        self.leak = 0.995
        self.stroke = 3.5
        self.frame = torch.zeros(N_SUB * PIX, N_SUB * PIX, device=device)
        self.integ = torch.zeros(1, N_ACT, device=device)
        self.cmd = torch.zeros(1, N_ACT, device=device)
        self.tip_tilt = torch.zeros(2, device=device)
        self.n_frames = 0
        self.g = torch.cuda.CUDAGraph()

    def _step(self):
        s = centroids(self.frame)
        valid = s[:, :, self.subap_mask]  # HAZARD: dynamic-shape
        self.tip_tilt.copy_(valid.mean(-1)[0])
        s = s - self.tip_tilt.view(1, 2, 1, 1)
        s[:, :, ~self.subap_mask] = 0.0  # CLEAN: bool-mask assignment of a scalar is capturable
        delta = self.recon(s)
        gain = self.loop_gain  # HAZARD: python-scalar
        self.integ.mul_(self.leak).add_(delta, alpha=-gain)
        offsets = torch.from_numpy(self.dm_offsets_np).to(self.integ.device)  # HAZARD: pinned-memory
        self.cmd.copy_(torch.clamp(self.integ + offsets, -self.stroke, self.stroke))  # CLEAN: stroke limit never changes after capture
        self.n_frames += 1  # HAZARD: host-code

    @torch.no_grad()
    def arm(self):
        for _ in range(5):
            self._step()
        torch.cuda.synchronize()
        self.integ.zero_()
        self.g.capture_begin()  # HAZARD: stream
        self._step()
        self.g.capture_end()

    @torch.no_grad()
    def run(self, camera, dm, n):
        pinned = torch.empty(N_SUB * PIX, N_SUB * PIX).pin_memory()
        for k in range(n):
            pinned.copy_(torch.from_numpy(camera.read()))
            self.frame.copy_(pinned, non_blocking=True)  # CLEAN: pinned staging copy issued outside the graph
            self.g.replay()
            dm.write(self.cmd.cpu().numpy())  # CLEAN: host read after the replay
            if k % 1000 == 999:
                self.loop_gain = min(self.loop_gain + 0.05, 0.6)     # operator gain ramp


if __name__ == "__main__":
    from rtc_hw import Camera, DeformableMirror

    recon = Reconstructor()
    recon.load_state_dict(torch.load("recon_kl_modes.pt", weights_only=True))
    mask = torch.from_numpy(np.load("pupil_mask.npy")).bool()
    loop = AOLoop(recon, mask, np.load("flat_map.npy").astype(np.float32))
    loop.arm()
    loop.run(Camera("ocam2k"), DeformableMirror("alpao97"), n=100_000)
