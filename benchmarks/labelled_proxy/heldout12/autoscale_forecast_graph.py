"""Predictive autoscaler for the web tier.

Every 15 s the controller feeds the last two hours of requests per second
for each deployment to a small temporal-conv forecaster, gets the next 15
minutes, and converts that to a replica count using each deployment's
per-pod capacity. Canary deployments get their own graph.
"""
import time

import numpy as np
import torch
import torch.nn as nn

HIST, HORIZON, N_DEPLOY = 480, 60, 64


class RpsForecaster(nn.Module):
    def __init__(self, ch=48):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(3, ch, 7, padding=3), nn.GELU(),
            nn.Conv1d(ch, ch, 7, padding=6, dilation=2), nn.GELU(),
            nn.Conv1d(ch, ch, 7, padding=12, dilation=4), nn.GELU(),
        )
        self.head = nn.Linear(ch * 8, HORIZON)

    def forward(self, x):
        h = nn.functional.adaptive_avg_pool1d(self.net(x), 8).flatten(1)
        return nn.functional.softplus(self.head(h))


class Autoscaler:
    def __init__(self, model, pod_capacity_rps, min_replicas=2):
        self.model = model.cuda().eval()
        self.capacity_np = pod_capacity_rps.astype(np.float32)
        self.min_replicas = min_replicas
        self.hist = torch.zeros(N_DEPLOY, HIST, device="cuda")
        self.pinned_hist = torch.zeros(N_DEPLOY, HIST).pin_memory()
        self.cap_stream = torch.cuda.Stream()

    def _plan(self):
        self.hist.copy_(self.pinned_hist, non_blocking=True)  # CLEAN: H2D copy from pinned host memory
        tod = (time.time() % 86400.0) / 86400.0  # HAZARD: host-code
        scale = self.hist.amax(dim=1, keepdim=True).clamp(min=1.0)
        x = torch.stack([self.hist / scale,
                         torch.full_like(self.hist, np.sin(2 * np.pi * tod)),
                         torch.full_like(self.hist, np.cos(2 * np.pi * tod))], dim=1)
        pred = self.model(x) * scale
        capacity = torch.as_tensor(self.capacity_np, device="cuda")  # HAZARD: pinned-memory
        if (pred.amax(dim=1) < capacity).all():  # HAZARD: dynamic-control-flow
            return torch.full((N_DEPLOY,), float(self.min_replicas), device="cuda")
        replicas = torch.ceil(pred.amax(dim=1) * 1.2 / capacity)
        return replicas.clamp(min=self.min_replicas)

    def _warm(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.no_grad():
            for _ in range(3):
                self._plan()
        torch.cuda.current_stream().wait_stream(s)

    def capture(self):
        self._warm()
        self.g = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(self.g, stream=torch.cuda.current_stream()):  # HAZARD: stream
            self.replicas = self._plan()
        self.g_canary = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(self.g_canary, stream=self.cap_stream):  # CLEAN: dedicated side stream
            self.canary_pred = self.model(torch.stack([self.hist / 1e3] * 3, dim=1))

    def tick(self, rps_window):
        self.pinned_hist.copy_(torch.from_numpy(rps_window))
        self.g.replay()
        self.g_canary.replay()
        return self.replicas.int().cpu().numpy()  # CLEAN: host read after the replay, outside the graph


if __name__ == "__main__":
    caps = np.random.uniform(200, 800, N_DEPLOY)
    scaler = Autoscaler(RpsForecaster(), caps)
    scaler.capture()
    while True:
        window = np.random.gamma(2.0, 150.0, (N_DEPLOY, HIST)).astype(np.float32)
        target = scaler.tick(window)
        print("replicas:", target[:8])
        time.sleep(15)
