"""Collision detection for a 7-DoF cobot: generalized-momentum observer with a
learned residual for unmodelled joint friction. The 1 kHz observer tick is a CUDA
graph replayed from the real-time loop.
"""
import numpy as np
import torch
import torch.nn as nn

DOF = 7
DT = 1e-3


class FrictionResidual(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3 * DOF + 1, 128), nn.Tanh(), nn.Linear(128, DOF))

    def forward(self, q, qd, tau, payload):
        return self.net(torch.cat([q, qd, tau, payload], dim=-1))


class MomentumObserver:
    def __init__(self, model: FrictionResidual, K_o=50.0, device="cuda"):
        self.dev = device
        self.model = model.to(device).eval()
        self.K_o = torch.full((DOF,), K_o, device=device)
        self.thr = torch.full((DOF,), 8.0, device=device)  # Nm per joint
        self.payload_kg = 0.0
        self.static_q = torch.zeros(1, DOF, device=device)
        self.static_qd = torch.zeros(1, DOF, device=device)
        self.static_tau = torch.zeros(1, DOF, device=device)
        self.p_hat = torch.zeros(1, DOF, device=device)
        self.r = torch.zeros(1, DOF, device=device)
        self.alarm = torch.zeros(1, DOF, dtype=torch.bool, device=device)
        self.stop_requested = False
        self.graph = torch.cuda.CUDAGraph()

    @staticmethod
    def _momentum(q, qd):
        return (1.0 + 0.3 * torch.cos(q)) * qd  # diagonal M(q) approximation

    def _observe(self):
        payload = torch.full((1, 1), self.payload_kg, device=self.dev)  # HAZARD: python-scalar
        tau_f = self.model(self.static_q, self.static_qd, self.static_tau, payload)
        self.p_hat.add_(DT * (self.static_tau - tau_f + self.r))
        r_new = self.K_o * (self._momentum(self.static_q, self.static_qd) - self.p_hat)
        self.r.lerp_(r_new, 0.5)  # CLEAN: in-place state update keeps the address
        self.alarm |= self.r.abs() > self.thr  # CLEAN: latched on the device, no host branch
        torch.cuda.synchronize()  # HAZARD: host-sync
        if (self.r.abs() > self.thr).any():  # HAZARD: dynamic-control-flow
            self.stop_requested = True

    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._observe()
        torch.cuda.current_stream().wait_stream(s)
        self.p_hat.zero_()
        self.r.zero_()
        self.alarm.zero_()
        with torch.cuda.graph(self.graph):
            self._observe()

    def tick(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray):
        self.static_q = torch.as_tensor(q, dtype=torch.float32, device=self.dev).view(1, DOF)  # HAZARD: static-address
        self.static_qd.copy_(torch.as_tensor(qd, dtype=torch.float32).view(1, DOF))  # CLEAN: in-place copy into the static input
        self.static_tau.copy_(torch.as_tensor(tau, dtype=torch.float32).view(1, DOF))
        self.graph.replay()
        return self.alarm


if __name__ == "__main__":
    obs = MomentumObserver(FrictionResidual())
    obs.capture()
    for k in range(5000):
        if k == 2000:
            obs.payload_kg = 3.5  # gripper closed on a part
        q = np.random.randn(DOF) * 0.1
        alarm = obs.tick(q, np.zeros(DOF), np.random.randn(DOF))
    torch.cuda.synchronize()  # CLEAN: explicit sync after the replays, outside capture
    print("joints in collision:", alarm.nonzero().tolist())
