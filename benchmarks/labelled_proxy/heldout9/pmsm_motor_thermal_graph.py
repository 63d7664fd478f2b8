"""Thermal observer for permanent-magnet synchronous motors on an e-axle test bench.

An LSTM estimates stator winding, stator tooth, stator yoke and magnet temperatures from
currents, voltages, speed, torque and coolant temperature every 0.5 s for all benches at once.
The step is captured with capture_begin/capture_end on a dedicated stream.
"""
import random

import torch
import torch.nn as nn

N_IN, N_OUT = 8, 4            # i_d, i_q, u_d, u_q, speed, torque, coolant, ambient -> 4 temps


class ThermalLSTM(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.cell = nn.LSTMCell(N_IN, hidden)
        self.out = nn.Linear(hidden, N_OUT)

    def forward(self, x, h, c):
        h, c = self.cell(x, (h, c))
        return 25.0 + 100.0 * self.out(h), h, c


class BenchObserver:
    def __init__(self, model, n_benches=32, hidden=64, derate_c=140.0):
        self.model = model.cuda().eval()
        self.derate_c = derate_c
        self.coolant_c = 65.0                      # set by the bench PLC per test profile
        self.dither = 0.05
        self.x = torch.zeros(n_benches, N_IN, device="cuda")
        self.h = torch.zeros(n_benches, hidden, device="cuda")
        self.c = torch.zeros(n_benches, hidden, device="cuda")
        self.ambient = torch.full((n_benches, 1), 23.0, device="cuda")
        self.derate = torch.ones(n_benches, device="cuda")
        self.export_buf = torch.zeros(n_benches, N_OUT, device="cuda")
        self.cap_stream = torch.cuda.Stream()
        self.graph = torch.cuda.CUDAGraph()

    def _step(self):
        x = self.x.clone()
        coolant = self.coolant_c  # HAZARD: python-scalar
        x[:, 6] = (coolant - 50.0) / 20.0
        self.ambient.lerp_(x[:, 7:8], 0.01)  # CLEAN: in-place EWMA keeps the buffer address
        x[:, 7:8] = (self.ambient - 20.0) / 10.0
        x[:, 4] += random.gauss(0.0, self.dither)  # HAZARD: host-code
        temps, h_new, c_new = self.model(x, self.h, self.c)
        self.h, self.c = h_new, c_new  # HAZARD: static-address
        t_pm = temps[:, 3]
        if (t_pm > self.derate_c).any():  # HAZARD: dynamic-control-flow
            self.derate.copy_(torch.clamp((160.0 - t_pm) / 20.0, 0.2, 1.0))
        with torch.cuda.stream(torch.cuda.default_stream()):  # HAZARD: stream
            self.export_buf.copy_(temps)
        return temps

    @torch.no_grad()
    def capture(self):
        self.cap_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.cap_stream):
            for _ in range(3):
                self._step()
            self.graph.capture_begin()  # CLEAN: capture runs on a side stream
            self.temps = self._step()
            self.graph.capture_end()
        torch.cuda.current_stream().wait_stream(self.cap_stream)

    def tick(self, measurements):
        self.x.copy_(measurements)
        self.graph.replay()
        return self.temps.clone(), self.derate.clone()


def run_profile(obs, profile):
    history = []
    for phase in profile:
        obs.coolant_c = phase["coolant_c"]
        for meas in phase["samples"]:
            temps, derate = obs.tick(meas)
            history.append(temps)
    return torch.stack(history).cpu()  # CLEAN: host copy after all replays


if __name__ == "__main__":
    obs = BenchObserver(ThermalLSTM())
    obs.capture()
    profile = [
        {"coolant_c": c, "samples": [torch.randn(32, N_IN, device="cuda") for _ in range(120)]}
        for c in (40.0, 65.0, 80.0)
    ]
    temps = run_profile(obs, profile)
    print("max magnet temp", temps[..., 3].max().item())
