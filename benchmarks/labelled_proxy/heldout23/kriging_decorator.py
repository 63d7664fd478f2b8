"""Ordinary kriging + conditional simulation of a soil-contamination field.

Geostatistics code (ex-GSLIB Fortran user).  The prediction kernel is wrapped in a
`@graphed_once` decorator that captures on the first call and replays afterwards.
"""
import functools
import logging
import numpy as np
import pandas as pd
import torch

log = logging.getLogger("krige")
dev = torch.device("cuda")
RANGE_M = 350.0
SILL = 1.0
NUGGET = 0.05


def graphed_once(fn):
    state = {}

    @functools.wraps(fn)
    def wrapper(*args):
        if "g" not in state:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    fn(*args)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                state["out"] = fn(*args)
            state["g"] = g
        state["g"].replay()
        return state["out"]
    return wrapper


def spherical(h):
    r = (h / RANGE_M).clamp(max=1.0)
    return NUGGET + (SILL - NUGGET) * (1.5 * r - 0.5 * r ** 3)


class Kriger:
    def __init__(self, obs_xy, obs_val, grid_xy):
        self.obs_xy = torch.as_tensor(obs_xy, dtype=torch.float32, device=dev)
        self.obs_values = torch.as_tensor(obs_val, dtype=torch.float32, device=dev)
        self.grid_xy = torch.as_tensor(grid_xy, dtype=torch.float32, device=dev)
        n = len(obs_val)
        G = spherical(torch.cdist(self.obs_xy, self.obs_xy))
        A = torch.ones(n + 1, n + 1, device=dev)
        A[:n, :n] = G
        A[n, n] = 0.0
        self.A_inv = torch.linalg.inv(A)          # eager, once per data set
        self.sim_gen = torch.Generator(device=dev)
        self.sim_gen.manual_seed(17)

    @graphed_once
    def predict(self):
        n = self.obs_values.shape[0]
        g0 = spherical(torch.cdist(self.grid_xy, self.obs_xy))
        rhs = torch.cat([g0, torch.ones(g0.shape[0], 1, device=dev)], 1)
        lam = rhs @ self.A_inv
        mean = lam[:, :n] @ self.obs_values
        var = (lam * rhs).sum(1)
        if (var < 0).any():  # HAZARD: dynamic-control-flow
            var = var.clamp_min(0.0)
        log.debug(f"mean kriging variance {var.mean():.4f}")  # HAZARD: host-sync
        z = torch.randn(mean.shape, device=dev, generator=self.sim_gen)  # HAZARD: rng
        sim = mean + var.clamp_min(0.0).sqrt() * z
        sim = sim + NUGGET ** 0.5 * torch.randn_like(mean)  # CLEAN: default CUDA generator
        return mean, var.clamp_min(0.0), sim  # CLEAN: clamp_min instead of a branch

    def update_obs(self, new_values):
        self.obs_values = torch.as_tensor(new_values, dtype=torch.float32, device=dev)  # HAZARD: static-address

    def update_obs_inplace(self, new_values):
        self.obs_values.copy_(torch.as_tensor(new_values, dtype=torch.float32))  # CLEAN: copy_ into the captured tensor


if __name__ == "__main__":
    wells = pd.read_csv("boreholes_pb.csv")
    gx, gy = np.meshgrid(np.arange(0, 2000, 10.0), np.arange(0, 1500, 10.0))
    grid = np.stack([gx.ravel(), gy.ravel()], 1)
    k = Kriger(wells[["x", "y"]].to_numpy(), np.log(wells.pb_2015.to_numpy()), grid)
    for col in [c for c in wells.columns if c.startswith("pb_")]:      # same wells, one column per campaign
        k.update_obs(np.log(wells[col].to_numpy()))
        m, v, s = k.predict()
        np.save(f"krige_{col}.npy", np.exp(m.cpu().numpy()).reshape(gx.shape))
