"""Latency benchmarks for a smartphone-recorded cough screening model (TB triage).

Cases are functools.partial objects over the model pieces; `bench_graph` warms a case up,
captures it once and times replays. `footprint` measures the graph pool size of a case.
"""
import functools
import time

import numpy as np
import torch
import torch.nn as nn

SR, N_FFT, HOP = 16000, 512, 160
MEL_BANDS = [0, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256]


class CoughNet(nn.Module):
    def __init__(self, n_bins=257):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(n_bins, 128, 5, padding=2), nn.ReLU(),
                                  nn.Conv1d(128, 128, 5, padding=2), nn.ReLU())
        self.att = nn.Linear(128, 1)
        self.out = nn.Linear(128, 1)

    def forward(self, spec):                                         # (B, bins, frames)
        h = self.conv(spec).transpose(1, 2)
        w = torch.softmax(self.att(h), 1)
        return torch.sigmoid(self.out((w * h).sum(1))).squeeze(-1)


def log_spec(wave, window, gain=1.0):
    frames = wave.unfold(-1, N_FFT, HOP) * window
    return torch.log1p(gain * torch.fft.rfft(frames).abs()).transpose(1, 2)


class GainSweep:
    def __init__(self, model, window):
        self.model, self.window, self.gain = model, window, 1.0

    def __call__(self, wave):
        g = self.gain  # HAZARD: python-scalar
        return self.model(log_spec(wave, self.window, g))


def band_energy_case(wave, window):
    spec = log_spec(wave, window)
    edges = torch.tensor(MEL_BANDS, device=wave.device)  # HAZARD: host-sync
    return torch.stack([spec[:, a:b].mean(1) for a, b in zip(edges[:-1], edges[1:])], 1)


def denoise_case(model, wave, window, noise_profile):
    prof = torch.from_numpy(noise_profile).to("cuda")  # HAZARD: pinned-memory
    return model(torch.clamp(log_spec(wave, window) - prof[None, :, None], min=0.0))


def pinned_case(model, wave, window, host_buf, dev_buf):
    dev_buf.copy_(host_buf, non_blocking=True)  # CLEAN: H2D copy from pinned memory is capturable
    return model(log_spec(wave + dev_buf, window))


def bench_graph(fn, *args, iters=200, amp=True):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16, enabled=amp):  # HAZARD: autocast-cache
        with torch.cuda.stream(s):
            for _ in range(3):
                fn(*args)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = fn(*args)
    torch.cuda.synchronize()  # CLEAN: synchronize after the capture, outside the graph
    t0 = time.perf_counter()
    for _ in range(iters):
        g.replay()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e3, g, out


def footprint(fn, *args):
    before = torch.cuda.memory_reserved()
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g):  # HAZARD: api-misuse
        fn(*args)
    return torch.cuda.memory_reserved() - before


if __name__ == "__main__":
    model = CoughNet().cuda().eval()
    window = torch.hann_window(N_FFT, device="cuda")  # CLEAN: window built once, outside every capture
    wave = torch.randn(32, 5 * SR, device="cuda")
    sweep = GainSweep(model, window)
    cases = {"plain": functools.partial(model, log_spec(wave, window)),
             "bands": functools.partial(band_energy_case, wave, window),
             "denoise": functools.partial(denoise_case, model, wave, window, np.zeros(N_FFT // 2 + 1, np.float32)),
             "pinned": functools.partial(pinned_case, model, wave, window, torch.zeros(1, 5 * SR).pin_memory(),
                                         torch.zeros(1, 5 * SR, device="cuda"))}
    for name, case in cases.items():
        print(name, f"{bench_graph(case)[0]:.3f} ms")
    ms, g, out = bench_graph(sweep, wave)
    for gain in (0.5, 2.0, 4.0):
        sweep.gain = gain
        g.replay()
        print("gain", gain, out.mean().item())
    print("footprint 2x batch:", footprint(sweep, torch.cat([wave, wave])) / 2 ** 20, "MiB")
