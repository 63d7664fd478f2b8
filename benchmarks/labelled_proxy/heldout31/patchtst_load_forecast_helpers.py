"""PatchTST day-ahead electricity load forecasting (321 substations, 512-step lookback, 96-step horizon).

Assistant-added helpers `capture_graph(fn, *args)` and `benchmark(fn, *args)`; the nightly
forecast job now replays graphs for the backbone and the new quantile head.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def capture_graph(fn, *args, warmup=3, pool=None):
    static_args = [a.clone() for a in args]
    if warmup:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(warmup):
                fn(*static_args)
        torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, pool=pool):
        static_out = fn(*static_args)

    def replay(*new_args):
        for dst, src in zip(static_args, new_args):
            dst.copy_(src)  # CLEAN: copy_ into the static inputs
        g.replay()
        return static_out

    return replay


def benchmark(fn, *args, iters=200):
    for _ in range(10):
        fn(*args)
    torch.cuda.synchronize()  # CLEAN: sync outside any capture
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn(*args)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


class PatchTSTBackbone(nn.Module):
    def __init__(self, patch=16, stride=8, d=128, heads=8, layers=3, lookback=512):
        super().__init__()
        self.patch, self.stride, self.heads = patch, stride, heads
        n_patches = (lookback - patch) // stride + 2
        self.embed = nn.Linear(patch, d)
        self.pos = nn.Parameter(torch.randn(1, n_patches, d) * 0.02)
        self.qkv = nn.ModuleList(nn.Linear(d, 3 * d) for _ in range(layers))
        self.ffn = nn.ModuleList(nn.Sequential(nn.Linear(d, 256), nn.GELU(), nn.Linear(256, d)) for _ in range(layers))
        self.norms = nn.ModuleList(nn.BatchNorm1d(d) for _ in range(2 * layers))
        self.station_scale = np.ones((1, 321, 1), np.float32)  # per-substation calibration, from the asset DB

    def forward(self, x):  # x: (B, C, L)
        if torch.isnan(x).any():  # HAZARD: dynamic-control-flow
            x = torch.nan_to_num(x)
        mu, sd = x.mean(-1, keepdim=True), x.std(-1, keepdim=True) + 1e-5  # RevIN
        x = F.pad((x - mu) / sd, (0, self.stride), mode="replicate")
        p = x.unfold(-1, self.patch, self.stride)  # CLEAN: unfold on fixed shapes
        b, c, n, _ = p.shape
        h = self.embed(p).flatten(0, 1) + self.pos
        for i, (qkv, ffn) in enumerate(zip(self.qkv, self.ffn)):
            q, k, v = qkv(h).view(b * c, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2)
            h = self.norms[2 * i]((h + a).transpose(1, 2)).transpose(1, 2)
            h = self.norms[2 * i + 1]((h + ffn(h)).transpose(1, 2)).transpose(1, 2)
        scale = torch.from_numpy(self.station_scale).to(x.device)  # HAZARD: pinned-memory
        return h.view(b, c, -1), mu * scale, sd


class QuantileHead(nn.Module):
    def __init__(self, in_dim, horizon=96, quantiles=(0.1, 0.5, 0.9)):
        super().__init__()
        self.proj = nn.Linear(in_dim, horizon * len(quantiles))
        self.horizon, self.nq = horizon, len(quantiles)

    def forward(self, h, mu, sd):
        y = self.proj(h).view(*h.shape[:2], self.nq, self.horizon)
        return y.sort(dim=2).values * sd.unsqueeze(-1) + mu.unsqueeze(-1)  # CLEAN: sort keeps quantiles monotone on device


@torch.no_grad()
def nightly_forecast(backbone, head, windows):
    x0 = windows[0].cuda()
    enc_fn = capture_graph(backbone, x0)
    h, mu, sd = enc_fn(x0)
    head_fn = capture_graph(head, h, mu, sd, warmup=0)  # HAZARD: api-misuse
    print(f"graph latency: {benchmark(enc_fn, x0):.3f} ms")
    forecasts = []
    for w in windows:
        h, mu, sd = enc_fn(w.cuda(non_blocking=True))
        forecasts.append(head_fn(h, mu, sd))  # HAZARD: static-address
    return torch.stack(forecasts).cpu()
