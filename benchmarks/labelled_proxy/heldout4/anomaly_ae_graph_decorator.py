"""Sensor anomaly detection: an LSTM autoencoder scores sliding windows of plant telemetry.

`score` is wrapped by the project-wide `@cuda_graphed` decorator, which captures
one graph per input shape on the first call and replays it afterwards.
"""
import functools
import logging

import torch
import torch.nn as nn

log = logging.getLogger("telemetry.anomaly")


def cuda_graphed(fn):
    cache = {}

    @functools.wraps(fn)
    def wrapper(self, x):
        key = tuple(x.shape)
        if key not in cache:
            static_x = x.clone()
            g = torch.cuda.CUDAGraph()
            with torch.no_grad(), torch.cuda.graph(g):  # HAZARD: api-misuse
                static_y = fn(self, static_x)
            cache[key] = (g, static_x, static_y)
        g, static_x, static_y = cache[key]
        static_x.copy_(x)  # CLEAN: new window copied into the captured input
        g.replay()
        return static_y

    return wrapper


class LSTMAutoencoder(nn.Module):
    def __init__(self, n_sensors=48, hidden=128, latent=32):
        super().__init__()
        self.enc = nn.LSTM(n_sensors, hidden, batch_first=True)
        self.to_z = nn.Linear(hidden, latent)
        self.dec = nn.LSTM(latent, hidden, batch_first=True)
        self.out = nn.Linear(hidden, n_sensors)

    def forward(self, x):
        h, _ = self.enc(x)
        z = self.to_z(h[:, -1])
        y, _ = self.dec(z[:, None].expand(-1, x.shape[1], -1))
        return self.out(y)


class AnomalyScorer:
    def __init__(self, ae: LSTMAutoencoder):
        self.ae = ae.eval().cuda()
        self.err_mean = torch.zeros((), device="cuda")
        self.err_var = torch.ones((), device="cuda")
        self.threshold = 6.0

    @cuda_graphed
    def score(self, x):
        err = (self.ae(x) - x).pow(2).mean((1, 2))
        self.err_mean = 0.99 * self.err_mean + 0.01 * err.mean()  # HAZARD: static-address
        self.err_var.mul_(0.99).add_(0.01 * (err - self.err_mean).pow(2).mean())  # CLEAN: running variance updated in place on the device
        z = (err - self.err_mean) / self.err_var.sqrt().clamp_min(1e-6)
        log.info(f"window batch max z={z.max():.2f}")  # HAZARD: host-sync
        torch.cuda.empty_cache()  # HAZARD: memory
        return z

    def recalibrate(self, history):
        zs = torch.cat(history)
        self.threshold = float(torch.quantile(zs, 0.999).item())  # CLEAN: quantile read on the host, outside the graph


def monitor(scorer: AnomalyScorer, stream_windows, alert):
    history = []
    for step, win in enumerate(stream_windows):
        z = scorer.score(win.cuda(non_blocking=True)).clone()
        history.append(z)
        flagged = (z > scorer.threshold).nonzero().flatten().tolist()  # CLEAN: nonzero on the cloned scores, outside the graph
        for idx in flagged:
            alert(step, idx, float(z[idx]))
        if step % 1000 == 999:
            scorer.recalibrate(history[-1000:])
    return history
