"""Fixed-grid RK4 integration of a neural ODE, captured once and replayed per solve.

Used by the latent-dynamics service: each request integrates a batch of latent
states from t0 to a requested horizon under a forcing vector from the simulator.
"""
import numpy as np
import torch
import torch.nn as nn


class ODEFunc(nn.Module):
    def __init__(self, dim, hidden=128):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim + 1, hidden), nn.Tanh(), nn.Linear(hidden, hidden),
                                 nn.Tanh(), nn.Linear(hidden, dim))
        self.register_buffer("nfe", torch.zeros((), dtype=torch.long))

    def forward(self, t, y, forcing):
        self.nfe += 1  # CLEAN: device-side counter, incremented by the graph on every replay
        tt = torch.full_like(y[..., :1], t)
        return self.net(torch.cat([y, tt], -1)) + forcing


class CapturedRK4:
    def __init__(self, func: ODEFunc, dim, batch, n_steps=40, t0=0.0, t1=1.0):
        self.func = func.eval().cuda()
        self.n_steps, self.t0, self.t1 = n_steps, t0, t1
        self.y0 = torch.zeros(batch, dim, device="cuda")
        self.y_out = torch.zeros(batch, dim, device="cuda")
        self.stats = torch.zeros(2, device="cuda")
        self.forcing_np = np.zeros(dim, dtype=np.float32)
        self.err_log = []
        self.graph = None

    def _rk4(self, t, y, h, u):
        k1 = self.func(t, y, u)
        k2 = self.func(t + h / 2, y + h / 2 * k1, u)
        k3 = self.func(t + h / 2, y + h / 2 * k2, u)
        k4 = self.func(t + h, y + h * k3, u)
        return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)

    def _record_stats(self, y):
        with torch.cuda.stream(torch.cuda.default_stream()):  # HAZARD: stream
            self.stats.copy_(torch.stack([y.norm(dim=-1).mean(), y.abs().amax()]))

    def _integrate(self):
        u = torch.from_numpy(self.forcing_np).to("cuda")  # HAZARD: pinned-memory
        h = (self.t1 - self.t0) / self.n_steps  # HAZARD: python-scalar
        y, t = self.y0, self.t0
        for i in range(self.n_steps):  # CLEAN: the step count is fixed when the solver is built
            y_full = self._rk4(t, y, h, u)
            if i == self.n_steps - 1:
                y_half = self._rk4(t + h / 2, self._rk4(t, y, h / 2, u), h / 2, u)
                self.err_log.append((y_full - y_half).abs().amax().item())  # HAZARD: host-sync
            y, t = y_full, t + h
        if y.abs().amax() > 1e6:  # HAZARD: dynamic-control-flow
            y = y.clamp(-1e6, 1e6)
        self._record_stats(y)
        self.y_out.copy_(y)

    def _capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.no_grad(), torch.cuda.stream(side):
            for _ in range(3):
                self._integrate()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(self.graph):
            self._integrate()

    def solve(self, y0, horizon, forcing):
        if self.graph is None:
            self._capture()
        self.t1 = self.t0 + horizon
        self.forcing_np[:] = forcing
        self.y0.copy_(y0)
        self.graph.replay()
        return self.y_out


def rollout_requests(solver, requests):
    trajectories = []
    for y0, horizon, forcing in requests:
        trajectories.append(solver.solve(y0, horizon, forcing).clone())  # CLEAN: cloned before the next replay
    return trajectories, int(solver.func.nfe.item())
