"""Learned EKF-style state estimator for a quadrotor swarm; predict/update captured with capture_begin/end."""
import random
import torch
import torch.nn as nn

class WindModel:
    def __init__(self):
        self.gust_ms = 0.0
        self.heading = torch.zeros(3, device="cuda")
    @property
    def drift(self):
        return self.heading * self.gust_ms  # HAZARD: python-scalar
    def update_heading(self, h):
        self.heading.copy_(h)  # CLEAN: in-place update of a tensor read by the graph

class ProcessModel(nn.Module):
    def __init__(self, wind, dt=0.01):
        super().__init__()
        self.wind, self.dt = wind, dt
        self.residual = nn.Sequential(nn.Linear(13, 64), nn.Tanh(), nn.Linear(64, 6))
    def forward(self, x, u):
        pos, vel = x[:, :3], x[:, 3:6]
        acc = u[:, :3] + self.wind.drift + self.residual(torch.cat([x, u[:, :4]], -1))[:, :3]
        return torch.cat([pos + self.dt * vel, vel + self.dt * acc, x[:, 6:]], -1)

class Gate:
    def __init__(self, chi2=16.0):
        self.chi2 = chi2
    def apply(self, innov, S):
        nis = (innov ** 2 / S).sum(-1)
        if (nis > self.chi2).any():  # HAZARD: dynamic-control-flow
            innov = innov * (nis <= self.chi2).unsqueeze(-1)
        return innov

class SoftGate(Gate):
    def apply(self, innov, S):
        nis = (innov ** 2 / S).sum(-1, keepdim=True)
        return innov * torch.clamp(self.chi2 / nis, max=1.0)  # CLEAN: branch-free gating

class Filter:
    def __init__(self, process, gate, n=64):
        self.process, self.gate = process.cuda(), gate
        self.x = torch.zeros(n, 10, device="cuda")
        self.u = torch.zeros(n, 6, device="cuda")
        self.z = torch.zeros(n, 3, device="cuda")
        self.S = torch.ones(n, 3, device="cuda")
    def _sensor_dropout(self, z):
        if random.random() < 0.05:  # HAZARD: host-code
            return torch.zeros_like(z)
        return z
    def step(self):
        xp = self.process(self.x, self.u)
        innov = self._sensor_dropout(self.z) - xp[:, :3]
        xp[:, :3] += 0.3 * self.gate.apply(innov, self.S)
        self.x.copy_(xp)  # CLEAN: state written back in place

class EstimatorGraph:
    def __init__(self, filt):
        self.filt = filt
    @torch.no_grad()
    def warm_and_capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self.filt.step()
        torch.cuda.current_stream().wait_stream(side)
        self.g = torch.cuda.CUDAGraph()
        self.g.capture_begin()  # HAZARD: stream
        self.filt.step()
        self.g.capture_end()
    def tick(self, u, z):
        self.filt.u.copy_(u)  # CLEAN: copy_ into static inputs
        self.filt.z.copy_(z)
        self.g.replay()
        return self.filt.x

def fly(telemetry, wind_reports, robust=False):
    wind = WindModel()
    est = EstimatorGraph(Filter(ProcessModel(wind), SoftGate() if robust else Gate()))
    est.warm_and_capture()
    track = []
    for (u, z), (gust, heading) in zip(telemetry, wind_reports):
        wind.gust_ms = gust
        wind.update_heading(heading.cuda())
        track.append(est.tick(u.cuda(), z.cuda()).clone())  # CLEAN: state cloned per tick
    return torch.stack(track)
