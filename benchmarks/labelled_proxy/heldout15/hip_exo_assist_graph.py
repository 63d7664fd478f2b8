"""Hip exoskeleton assistance controller.

Two thigh IMUs (accelerometer + gyroscope, 6 channels each) feed a phase
estimator; the assistive torque follows a phase-locked flexion/extension
profile scaled by body mass. The 200 Hz tick is replayed from a CUDA graph so
the embedded GPU keeps a fixed latency.
"""
import math

import torch
import torch.nn as nn

N_CH, WINDOW, PROFILE_LEN = 12, 50, 100


def assist_profile():
    t = torch.linspace(0, 1, PROFILE_LEN)
    flex = torch.exp(-((t - 0.55) / 0.08) ** 2)
    ext = -0.6 * torch.exp(-((t - 0.15) / 0.07) ** 2)
    return flex + ext


class PhaseNet(nn.Module):
    def __init__(self, width=256):
        super().__init__()
        self.mlp = nn.Sequential(
            nn.Linear(WINDOW * N_CH, width), nn.ReLU(),
            nn.Linear(width, width), nn.ReLU(),
            nn.Linear(width, 6),                 # cos/sin left, cos/sin right, confidence left/right
        )

    def forward(self, x):
        return self.mlp(x)


class ExoController:
    def __init__(self, net, body_mass_kg=72.0, max_torque_nm=18.0):
        self.net = net.cuda().eval()
        self.imu = torch.zeros(1, N_CH, device="cuda")
        self.window = torch.zeros(1, WINDOW, N_CH, device="cuda")
        self.profile = assist_profile().cuda()  # CLEAN: lookup table uploaded before capture
        self.limit = torch.full((2,), max_torque_nm, device="cuda")
        self.torque = torch.zeros(2, device="cuda")
        self.mass = body_mass_kg
        self.assist_gain = 0.15                       # Nm/kg, set from the therapist's tablet
        self.graph = None

    def set_assist(self, gain_nm_per_kg):
        self.assist_gain = gain_nm_per_kg

    def _tick(self):
        self.window = torch.cat([self.window[:, 1:], self.imu.unsqueeze(1)], 1)  # HAZARD: static-address
        out = self.net(self.window.flatten(1))
        phase = (torch.atan2(out[:, 1::2][:, :2], out[:, 0::2][:, :2]) / (2 * math.pi)) % 1.0
        conf = torch.sigmoid(out[:, 4:6])
        idx = (phase * PROFILE_LEN).long().clamp(0, PROFILE_LEN - 1)
        tau = self.profile.gather(0, idx.view(-1))  # CLEAN: gather with a CUDA index tensor
        k = self.assist_gain * self.mass  # HAZARD: python-scalar
        if conf.min() < 0.5:  # HAZARD: dynamic-control-flow
            tau = tau * 0.0
        tau = torch.clamp(k * tau, -self.limit, self.limit)  # CLEAN: clamp with tensor bounds
        self.torque.copy_(tau)

    def start(self):
        self.graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(self.graph):  # HAZARD: api-misuse
            self._tick()

    @torch.no_grad()
    def tick(self, imu_sample):
        self.imu.copy_(imu_sample)  # CLEAN: new sample copied into the static input
        self.graph.replay()
        return self.torque


if __name__ == "__main__":
    ctl = ExoController(PhaseNet())
    ctl.start()
    for step in range(2000):
        tau = ctl.tick(torch.randn(1, N_CH, device="cuda"))
        if step == 1000:
            ctl.set_assist(0.25)
    print(tau.cpu())
