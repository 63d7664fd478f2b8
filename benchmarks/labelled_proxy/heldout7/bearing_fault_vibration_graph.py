"""Rolling-element bearing diagnosis from accelerometer frames (CWRU-style rig).

Envelope analysis (band-pass + Hilbert envelope + envelope spectrum) feeds a 1D CNN
and the amplitudes at the bearing fault frequencies. A second graph computes the
health indicators (RMS, kurtosis, crest factor) logged for trending.
"""
import math

import numpy as np
import torch
import torch.nn as nn

FS, N = 12_000, 4096
N_SENSORS = 2                                  # drive end, fan end
BEARING = dict(n_balls=9, d_ball=7.94, d_pitch=39.04, contact_deg=0.0)   # SKF 6205-2RS


def fault_orders(b):
    r = b["d_ball"] / b["d_pitch"] * math.cos(math.radians(b["contact_deg"]))
    return [b["n_balls"] / 2 * (1 - r), b["n_balls"] / 2 * (1 + r), b["d_pitch"] / (2 * b["d_ball"]) * (1 - r * r)]


class EnvelopeCNN(nn.Module):
    def __init__(self, n_bins=1024, n_cls=4):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(N_SENSORS, 32, 9, padding=4), nn.ReLU(), nn.MaxPool1d(4),
                                  nn.Conv1d(32, 64, 9, padding=4), nn.ReLU(), nn.AdaptiveAvgPool1d(8))
        self.fc = nn.Linear(64 * 8 + 9 * N_SENSORS, n_cls)
        self.n_bins = n_bins

    def forward(self, spec, amp):
        return self.fc(torch.cat([self.conv(spec[..., : self.n_bins]).flatten(1), amp.flatten(1)], 1))


class BearingMonitor:
    def __init__(self, model, accel_cal_np, device="cuda"):
        self.model = model.eval().to(device)
        self.accel_cal_np = accel_cal_np.astype(np.float32)            # mV/g per sensor, from the DAQ config
        self.rpm = 1797.0
        self.static_sig = torch.zeros(1, N_SENSORS, N, device=device)
        freqs = torch.fft.fftfreq(N, 1.0 / FS, device=device).abs()
        h = torch.zeros(N, device=device)
        h[0], h[1 : N // 2], h[N // 2] = 1.0, 2.0, 1.0
        self.filt = h * ((freqs > 2000) & (freqs < 5000)).float()      # band-pass + Hilbert weights
        self.orders = torch.tensor(fault_orders(BEARING), device=device)  # CLEAN: built in __init__, outside capture
        self.side = torch.cuda.Stream()

    def on_tacho(self, rpm):
        self.rpm = rpm

    def _envelope(self, x):
        cal = torch.from_numpy(self.accel_cal_np).cuda()  # HAZARD: pinned-memory
        x = (x - x.mean(-1, keepdim=True)) / cal[:, None]
        env = torch.fft.ifft(torch.fft.fft(x) * self.filt).abs()
        torch.cuda.synchronize()  # HAZARD: host-sync
        return env - env.mean(-1, keepdim=True)

    def _run(self):
        env = self._envelope(self.static_sig)
        spec = torch.fft.rfft(env).abs() / N
        f_shaft = self.rpm / 60.0  # HAZARD: python-scalar
        harmonics = self.orders[:, None] * f_shaft * torch.arange(1, 4, device=spec.device)
        bins = (harmonics * N / FS).round().long().flatten()
        amp = spec[..., bins]  # CLEAN: gather with a CUDA index tensor
        return self.model(spec, amp).softmax(-1), amp

    def _health(self):
        x = self.static_sig
        rms = x.pow(2).mean(-1).sqrt()
        kurt = ((x - x.mean(-1, keepdim=True)) ** 4).mean(-1) / rms.pow(4).clamp_min(1e-12)
        crest = x.abs().amax(-1) / rms.clamp_min(1e-12)  # CLEAN: device reductions only
        return torch.stack([rms, kurt, crest], -1)

    @torch.no_grad()
    def capture(self):
        for _ in range(3):
            self._run()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=torch.cuda.current_stream()):  # HAZARD: stream
            self.static_probs, self.static_amp = self._run()

        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            for _ in range(3):
                self._health()
            self.hi_graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.hi_graph, stream=torch.cuda.current_stream()):  # CLEAN: current stream is the side stream here
                self.static_hi = self._health()
        torch.cuda.current_stream().wait_stream(self.side)

    @torch.no_grad()
    def on_frame(self, frame_pinned, tacho_rpm):
        self.on_tacho(tacho_rpm)                                    # speed varies with the process load
        self.static_sig.copy_(frame_pinned, non_blocking=True)  # CLEAN: pinned source, copy outside the graph
        self.graph.replay()
        self.hi_graph.replay()
        return self.static_probs.cpu(), self.static_hi.cpu()
