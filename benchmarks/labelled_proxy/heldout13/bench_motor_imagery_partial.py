"""Latency benchmarks for motor-imagery BCI decoders (22-channel EEG, 4 s trials at
250 Hz): an EEGNet-style CNN, a filter-bank log-power decoder and a covariance
(tangent-space-like) decoder. Each case is a zero-argument callable handed to
`bench_graph` (warm-up, capture, timed replays) or to `first_look`.
"""
import functools
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

FS, N_CH, T = 250, 22, 1000
BANDS_HZ = [(4, 8), (8, 12), (12, 16), (16, 24), (24, 32)]


def bench_graph(fn, iters=200, amp=True):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.autocast("cuda", dtype=torch.float16, enabled=amp):  # HAZARD: autocast-cache
        with torch.cuda.stream(s):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        g.replay()
    torch.cuda.synchronize()  # CLEAN: timing sync after the replays, outside capture
    return (time.perf_counter() - t0) / iters * 1e3, g


def first_look(fn):  # quick single-shot check of a new configuration
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # HAZARD: api-misuse
        fn()
    g.replay()
    return g


class EEGNet(nn.Module):
    def __init__(self, F1=8, D=2, n_cls=4):
        super().__init__()
        self.temporal = nn.Conv2d(1, F1, (1, 64), padding=(0, 32), bias=False)
        self.spatial = nn.Conv2d(F1, F1 * D, (N_CH, 1), groups=F1, bias=False)
        self.cls = nn.Linear(F1 * D * ((T + 1) // 8), n_cls)

    def forward(self, x):
        h = F.elu(self.spatial(self.temporal(x.unsqueeze(1))))
        return self.cls(F.avg_pool2d(h, (1, 8)).flatten(1))


def _band_power(x):
    edges = torch.tensor(BANDS_HZ, device=x.device, dtype=torch.float32)  # HAZARD: host-sync
    freqs = torch.fft.rfftfreq(T, 1 / FS, device=x.device)
    spec = torch.fft.rfft(x, dim=-1).abs().pow(2)
    masks = ((freqs >= edges[:, :1]) & (freqs < edges[:, 1:])).float()  # (bands, F)
    return torch.einsum("bcf,kf->bkc", spec, masks) / masks.sum(-1, keepdim=True)


def filter_bank_case(x, weights, montage_np):
    reref = torch.from_numpy(montage_np).cuda()  # HAZARD: pinned-memory
    return torch.log(_band_power(x) @ reref.T + 1e-6) @ weights


def filter_bank_pinned_case(x, weights, montage_pinned, reref_buf):
    reref_buf.copy_(montage_pinned, non_blocking=True)  # CLEAN: H2D copy from pinned memory is captured as a memcpy
    return torch.log(_band_power(x) @ reref_buf.T + 1e-6) @ weights


class CovarianceCase:  # shrinkage covariance + upper-triangle features + linear readout
    def __init__(self, readout, x):
        self.readout, self.x, self.shrink = readout, x, 0.1
        self.iu = torch.triu_indices(N_CH, N_CH, device=x.device)  # CLEAN: CUDA index tensor built once, before any capture
        self.eye = torch.eye(N_CH, device=x.device)

    def __call__(self):
        cov = self.x @ self.x.transpose(1, 2) / T
        cov = (1 - self.shrink) * cov + self.shrink * self.eye  # HAZARD: python-scalar
        return self.readout(cov[:, self.iu[0], self.iu[1]])


def main(dev="cuda"):
    x = torch.randn(64, N_CH, T, device=dev)
    montage = (np.eye(N_CH) - 1.0 / N_CH).astype(np.float32)  # common average reference
    weights = torch.randn(N_CH, 4, device=dev)
    eegnet = EEGNet().to(dev).eval()
    pinned, buf = torch.from_numpy(montage).pin_memory(), torch.empty(N_CH, N_CH, device=dev)
    cases = {
        "eegnet": functools.partial(eegnet, x),
        "filter_bank": functools.partial(filter_bank_case, x, weights, montage),
        "filter_bank_pinned": functools.partial(filter_bank_pinned_case, x, weights, pinned, buf),
    }
    with torch.no_grad():
        for name, fn in cases.items():
            print(f"{name:20s} {bench_graph(fn)[0]:7.3f} ms / 64 trials")
        cov_case = CovarianceCase(nn.Linear(N_CH * (N_CH + 1) // 2, 4).to(dev), x)
        _, g = bench_graph(cov_case)
        for shrink in (0.0, 0.05, 0.2):  # shrinkage sweep on the captured graph
            cov_case.shrink = shrink
            g.replay()
        first_look(functools.partial(eegnet, torch.randn(256, N_CH, T, device=dev)))


if __name__ == "__main__":
    main()
