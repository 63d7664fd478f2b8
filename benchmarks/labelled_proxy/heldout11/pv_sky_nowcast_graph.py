"""Sky-imager PV nowcasting for a 5 MW plant: 10-minute-ahead AC power from the last six
fisheye sky frames, the sun position and the latest inverter reading.

The model predicts the clear-sky index k; power = k * GHI_clear * capacity blended with
persistence. Inference is one captured CUDA graph replayed every 30 s.
"""
import time

import numpy as np
import torch
import torch.nn as nn


class SkyNet(nn.Module):
    def __init__(self, frames=6):
        super().__init__()
        self.cnn = nn.Sequential(
            nn.Conv2d(3 * frames, 48, 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv2d(48, 96, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(96, 128, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.mlp = nn.Sequential(nn.Linear(128 + 2, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, frames, sun):
        f = self.cnn(frames.flatten(1, 2))
        return torch.sigmoid(self.mlp(torch.cat([f, torch.cos(sun)], 1))) * 1.2


class PVNowcastService:
    def __init__(self, model, clear_sky_profile, capacity_kw=5000.0):
        self.model = model.cuda()
        self.capacity_kw = capacity_kw
        self.clear_sky = clear_sky_profile                   # np.ndarray (288,), Ineichen GHI per 5-min slot
        self.static_frames = torch.zeros(1, 6, 3, 128, 128, device="cuda")
        self.static_sun = torch.zeros(1, 2, device="cuda")   # zenith, azimuth in rad
        self.host_meter = torch.zeros(1, 1).pin_memory()
        self.dev_meter = torch.zeros(1, 1, device="cuda")
        self.stats_stream = torch.cuda.Stream()
        self.stats = torch.zeros(2, device="cuda")

    @torch.no_grad()
    def _forward(self):
        self.dev_meter.copy_(self.host_meter, non_blocking=True)  # CLEAN: H2D copy from pinned memory is recorded as a memcpy node
        cs = torch.as_tensor(self.clear_sky, device="cuda")  # HAZARD: pinned-memory
        slot = int(time.time() % 86400 // 300)  # HAZARD: host-code
        ghi_cs = cs[slot] / 1000.0
        k = self.model(self.static_frames, self.static_sun)
        overcast = (self.static_frames[:, -1].mean(1) < 0.35).float().mean((1, 2)).unsqueeze(1)
        k = torch.where(overcast > 0.5, 0.9 * k, k)  # CLEAN: torch.where instead of a host branch
        power = 0.7 * k * ghi_cs * self.capacity_kw + 0.3 * self.dev_meter
        with torch.cuda.stream(self.stats_stream):  # HAZARD: stream
            self.stats.copy_(torch.stack([power.mean(), power.amax()]))
        return power

    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            with torch.cuda.stream(side):
                for _ in range(3):
                    self._forward()
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.static_power = self._forward()

    def nowcast(self, frames, zenith, azimuth, meter_kw):
        self.static_frames.copy_(frames)
        self.static_sun[0, 0] = zenith  # CLEAN: sun angles written into a static device tensor before the replay
        self.static_sun[0, 1] = azimuth
        self.host_meter.fill_(meter_kw)
        self.graph.replay()
        return float(self.static_power[0, 0])  # CLEAN: host read after the replay


if __name__ == "__main__":
    profile = np.clip(np.sin(np.linspace(-np.pi / 2, 3 * np.pi / 2, 288)), 0, None) * 950.0
    svc = PVNowcastService(SkyNet(), profile.astype(np.float32))
    svc.capture()
    for _ in range(120):
        kw = svc.nowcast(torch.rand(1, 6, 3, 128, 128, device="cuda"), 0.6, 2.9, 3100.0)
        time.sleep(30)
