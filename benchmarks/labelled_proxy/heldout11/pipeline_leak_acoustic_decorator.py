"""Leak detection on a water-distribution main from hydrophone pairs.

Every 2 s window is whitened, cross-correlated between neighbouring hydrophones, and scored by
a small CNN over the cross-spectrum. The scoring method is wrapped by a capture-on-first-call
decorator that warms up on a side stream, captures, and replays afterwards.
"""
import functools
import time

import torch
import torch.nn as nn


def cuda_graphed(warmup=3):
    def deco(method):
        @functools.wraps(method)
        def wrapper(self, *inputs):
            state = self.__dict__.setdefault("_graph_state", {})
            if "graph" not in state:
                state["inputs"] = [x.clone() for x in inputs]
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(warmup):
                        method(self, *state["inputs"])
                torch.cuda.current_stream().wait_stream(s)
                state["graph"] = torch.cuda.CUDAGraph()
                with torch.cuda.graph(state["graph"]):
                    state["out"] = method(self, *state["inputs"])
            for dst, src in zip(state["inputs"], inputs):
                dst.copy_(src)
            state["graph"].replay()
            return state["out"]
        return wrapper
    return deco


class CrossSpectrumCNN(nn.Module):
    def __init__(self, n_freq=1025):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(2, 32, 15, stride=4, padding=7), nn.ReLU(),
                                 nn.Conv1d(32, 64, 9, stride=4, padding=4), nn.ReLU(),
                                 nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(64, 1))

    def forward(self, xspec):
        return self.net(xspec).squeeze(-1)


class LeakMonitor:
    def __init__(self, model, mic_cal, n_pairs=12, fs=4096):
        self.model = model.cuda().eval()
        self.mic_cal = mic_cal                                   # CPU tensor (n_pairs, 2): hydrophone sensitivities
        self.n_pairs, self.fs = n_pairs, fs
        self.window = torch.hann_window(2 * fs, device="cuda")
        self.alarm = 0.8
        self.line_pressure_bar = 4.2                             # pushed by SCADA every few minutes
        self.n_windows = torch.zeros((), dtype=torch.long, device="cuda")
        self.last_alarm = torch.zeros(n_pairs, device="cuda")

    @cuda_graphed(warmup=3)
    @torch.no_grad()
    def score(self, a, b):
        t0 = time.monotonic()  # HAZARD: host-code
        cal = self.mic_cal.to("cuda", non_blocking=True)  # HAZARD: pinned-memory
        A = torch.fft.rfft(a * cal[:, :1] * self.window)
        Bf = torch.fft.rfft(b * cal[:, 1:] * self.window)
        cross = A * Bf.conj() / (A.abs() * Bf.abs() + 1e-8)              # PHAT weighting
        p = self.line_pressure_bar  # HAZARD: python-scalar
        xspec = torch.stack([cross.real, cross.imag], 1) * (p / 4.0) ** 0.5
        prob = torch.sigmoid(self.model(xspec))
        self.n_windows.add_(1)  # CLEAN: device-side counter, advanced on every replay
        self.last_alarm.copy_(torch.where(prob > self.alarm, prob, torch.zeros_like(prob)))  # CLEAN: torch.where instead of a host branch
        if prob.max() > self.alarm:  # HAZARD: dynamic-control-flow
            self.alarm_since = t0
        return prob


if __name__ == "__main__":
    mon = LeakMonitor(CrossSpectrumCNN(), mic_cal=torch.ones(12, 2))
    for k in range(1800):
        a = torch.randn(12, 8192, device="cuda")
        b = torch.roll(a, 37, dims=1) + 0.3 * torch.randn_like(a)
        prob = mon.score(a, b)
        if k % 150 == 0:
            mon.line_pressure_bar = 3.8 + 0.1 * (k // 150 % 5)
            print("leak probability per pair:", prob.cpu().numpy().round(2))  # CLEAN: host read after the replay
