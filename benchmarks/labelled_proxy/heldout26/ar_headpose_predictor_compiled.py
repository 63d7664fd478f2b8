"""Head-pose prediction for late-stage reprojection on an AR headset (asyncio service).

Every display vsync the compositor asks for the head pose at photon time. The predictor
integrates the IMU samples received since the last frame with a small learned correction
network, compiled with mode="reduce-overhead". The prediction horizon follows the measured
motion-to-photon latency, which the compositor reports every frame.
"""
import asyncio
import time

import torch
import torch.nn as nn

MAX_SAMPLES = 32


class PoseCorrector(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(7 + 6, 128), nn.SiLU(), nn.Linear(128, 7))
        self.horizon_s = 0.012

    def forward(self, quat_pos, imu):
        gyro = imu[:, :, :3].mean(1)
        acc = imu[:, :, 3:].mean(1)
        self.t_eval = time.perf_counter()  # HAZARD: host-code
        h = self.horizon_s  # HAZARD: python-scalar
        q = quat_pos[:, :4]
        half = 0.5 * h * gyro
        dq = torch.cat([torch.ones_like(half[:, :1]), half], -1)
        q = torch.nn.functional.normalize(q + dq, dim=-1)
        pos = quat_pos[:, 4:] + 0.5 * acc * h * h
        corr = self.mlp(torch.cat([torch.cat([q, pos], -1), imu[:, -1]], -1))
        return torch.cat([q, pos], -1) + 0.01 * corr


class PredictionService:
    def __init__(self, dev="cuda"):
        self.dev = dev
        self.model = PoseCorrector().to(dev).eval()
        self.predict = torch.compile(self.model, mode="reduce-overhead")
        self.pose = torch.zeros(1, 7, device=dev)
        self.pose[0, 0] = 1.0
        self.imu_buf = []
        self.pad = torch.zeros(1, MAX_SAMPLES, 6, device=dev)

    def on_imu(self, sample):
        self.imu_buf.append(sample)

    def _batch_imu(self):
        imu = torch.stack(self.imu_buf[-MAX_SAMPLES:]).unsqueeze(0).to(self.dev)
        self.imu_buf.clear()
        return imu

    @torch.no_grad()
    def on_vsync(self, latency_s):
        self.model.horizon_s = latency_s
        imu = self._batch_imu()
        out = self.predict(self.pose, imu)  # HAZARD: dynamic-shape
        self.pose.copy_(out)
        return out.clone()

    @torch.no_grad()
    def on_vsync_padded(self, latency_s):
        self.model.horizon_s = latency_s
        n = min(len(self.imu_buf), MAX_SAMPLES)
        self.pad.zero_()
        if n:
            self.pad[0, -n:] = torch.stack(self.imu_buf[-n:]).to(self.dev)
        self.imu_buf.clear()
        out = self.predict(self.pose, self.pad)  # CLEAN: fixed-size padded window
        return out.clone()


async def compositor_link(service, reader, writer):
    while True:
        msg = await reader.readexactly(8)
        latency_s = int.from_bytes(msg, "little") * 1e-6
        pose = service.on_vsync_padded(latency_s)
        writer.write(pose.cpu().numpy().tobytes())  # CLEAN: host read-back outside the compiled region
        await writer.drain()


async def imu_feed(service, imu_stream):
    async for sample in imu_stream:
        service.on_imu(torch.as_tensor(sample, dtype=torch.float32))
        await asyncio.sleep(0)


async def main(imu_stream, port=7000):
    service = PredictionService()
    server = await asyncio.start_server(lambda r, w: compositor_link(service, r, w), "127.0.0.1", port)
    await asyncio.gather(server.serve_forever(), imu_feed(service, imu_stream))
