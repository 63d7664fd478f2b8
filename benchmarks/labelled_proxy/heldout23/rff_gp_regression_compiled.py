"""Random-Fourier-feature GP regression for a soil-moisture sensor network.

Hydrology group (R/GPy users) rewrote the model in torch: RFF approximation with
learnable lengthscales, MAP objective compiled with
backend="cudagraphs", optimizer step compiled the same way.
"""
import logging
import math
import numpy as np
import pandas as pd
import torch

logging.basicConfig(level=logging.INFO)
log = logging.getLogger("rffgp")
dev = "cuda"
N_FEAT = 1024

obs = pd.read_csv("soil_moisture_hourly.csv", parse_dates=["time"])
obs["t"] = (obs.time - obs.time.min()).dt.total_seconds() / 86400.0
Xnp = obs[["lon", "lat", "t", "depth_cm"]].to_numpy(np.float32)
ynp = obs["vwc"].to_numpy(np.float32)
mu_x, sd_x = Xnp.mean(0), Xnp.std(0)


class RFFGP(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.log_ls = torch.nn.Parameter(torch.zeros(d))
        self.log_sf = torch.nn.Parameter(torch.zeros(()))
        self.register_buffer("omega", torch.randn(d, N_FEAT))
        self.register_buffer("phase", 2 * math.pi * torch.rand(N_FEAT))
        self.w = torch.nn.Parameter(torch.zeros(N_FEAT))
        self.noise_var = 0.1

    def features(self, x):
        z = x @ (self.omega / self.log_ls.exp()[:, None]) + self.phase
        return math.sqrt(2.0 / N_FEAT) * self.log_sf.exp() * torch.cos(z)

    def nlml(self, x, y):
        # MAP weights of the RFF model: Gaussian likelihood + N(0, I) prior on w
        s2 = self.noise_var  # HAZARD: python-scalar
        f = self.features(x) @ self.w
        nll = 0.5 * ((f - y) ** 2).mean() / s2 + 0.5 * math.log(2 * math.pi * s2)
        return nll + 0.5 * (self.w ** 2).sum() / x.shape[0]


model = RFFGP(4).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=0.05)


def loss_fn(x, y):
    x.sub_(x.mean(0)).div_(x.std(0))  # HAZARD: static-address
    loss = model.nlml(x, y)
    log.info("nlml %s", loss)  # HAZARD: host-code
    return loss


def loss_fn_v2(x, y):
    xs = (x - x.mean(0)) / x.std(0)  # CLEAN: out-of-place standardisation
    return model.nlml(xs, y)


def diagnostics(x, y):
    nl = model.nlml(x, y)
    return nl.item()  # CLEAN: default torch.compile below, no CUDA graphs


step_loss = torch.compile(loss_fn, backend="cudagraphs")
step_opt = torch.compile(opt.step, backend="cudagraphs")
diag = torch.compile(diagnostics)
val_loss = torch.compile(loss_fn_v2, backend="cudagraphs")
Xd = torch.from_numpy(Xnp).to(dev)
yd = torch.from_numpy(ynp - ynp.mean()).to(dev)
BATCH = 8192

for it in range(3000):
    idx = torch.randint(0, len(Xd), (BATCH,), device=dev)
    xb, yb = Xd[idx], yd[idx]
    loss = step_loss(xb, yb)
    loss_val = loss.detach().clone()  # CLEAN: cloned right after the call, before the compiled step
    loss.backward()
    step_opt()
    opt.zero_grad(set_to_none=True)
    if it % 500 == 499:
        model.noise_var = max(model.noise_var * 0.5, 1e-3)
        for g in opt.param_groups:
            g["lr"] = g["lr"] * 0.7  # HAZARD: optimizer
    if it % 100 == 0:
        with torch.no_grad():
            v = float(val_loss(Xd[-BATCH:], yd[-BATCH:]))
        print(it, diag(xb, yb), float(loss_val), v)
