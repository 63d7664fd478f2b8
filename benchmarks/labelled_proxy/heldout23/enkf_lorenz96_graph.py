"""Stochastic EnKF for Lorenz-96 (N=40), observation every 4th variable.

Data-assimilation teaching code moved from Fortran/OpenMP to PyTorch: the forecast
(RK4, 5 steps) and the analysis are captured as one CUDA graph per cycle.
"""
import numpy as np
import torch

NVAR = 40
NENS = 64
FORCING = 8.0
DT = 0.01
NSTEP = 5
OBS_IDX = list(range(0, NVAR, 4))
R_VAR = 1.0
INFL = 1.05
dev = torch.device("cuda")


def l96(x):
    return (torch.roll(x, -1, 1) - torch.roll(x, 2, 1)) * torch.roll(x, 1, 1) - x + FORCING


def rk4(x):
    k1 = l96(x)
    k2 = l96(x + 0.5 * DT * k1)
    k3 = l96(x + 0.5 * DT * k2)
    k4 = l96(x + DT * k3)
    return x + DT / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)


class EnKF:
    def __init__(self, y_series):
        self.y_series = y_series                       # numpy (T, nobs), pageable
        self.X = FORCING + torch.randn(NENS, NVAR, device=dev)
        self.y_obs = torch.zeros(len(OBS_IDX), device=dev)
        self.obs_idx_t = torch.tensor(OBS_IDX, device=dev)  # CLEAN: built once in __init__, not in the capture
        self.innov_rms = torch.zeros((), device=dev)
        self.cycle = 0
        self.graph = torch.cuda.CUDAGraph()

    def forecast(self):
        x = self.X
        for _ in range(NSTEP):
            x = rk4(x)
        return x

    def analysis(self, Xf):
        xm = Xf.mean(0, keepdim=True)
        Xa = xm + INFL * (Xf - xm)
        HX = Xa[:, OBS_IDX]  # HAZARD: host-sync
        y = torch.from_numpy(self.y_series[self.cycle]).cuda()  # HAZARD: pinned-memory
        pert = np.random.normal(0.0, np.sqrt(R_VAR), size=(NENS, len(OBS_IDX)))  # HAZARD: host-code
        E = torch.as_tensor(pert, dtype=torch.float32, device=dev)
        # serial processing of the (uncorrelated) observations, as in the F90 code
        for j, i in enumerate(OBS_IDX):
            hx = Xa[:, i]
            hxp = hx - hx.mean()
            var = hxp.pow(2).sum() / (NENS - 1) + R_VAR
            cov = ((Xa - Xa.mean(0, keepdim=True)) * hxp[:, None]).sum(0) / (NENS - 1)
            Xa = Xa + (y[j] + E[:, j] - hx)[:, None] * (cov / var)[None, :]
        self.innov_rms.copy_((y[None, :] - HX).pow(2).mean().sqrt())
        return Xa

    def cycle_step(self):
        Xa = self.analysis(self.forecast())
        self.X.copy_(Xa)

    def analysis_gathered(self, Xf):
        # variant used in the paper runs: static obs buffer and CUDA index
        HX = Xf.index_select(1, self.obs_idx_t)  # CLEAN: gather with a CUDA index tensor
        eps = torch.randn(NENS, len(OBS_IDX), device=dev) * R_VAR ** 0.5  # CLEAN: default-generator CUDA RNG
        return HX, self.y_obs[None, :] + eps - HX

    def capture(self):
        with torch.cuda.graph(self.graph):  # HAZARD: api-misuse
            self.cycle_step()

    def run(self, n_cycles):
        self.capture()
        rmse = []
        for c in range(n_cycles):
            self.cycle = c
            self.y_obs.copy_(torch.from_numpy(self.y_series[c]))  # CLEAN: copy_ outside the capture
            self.graph.replay()
            rmse.append(self.X.mean(0).std().item())
        return rmse


if __name__ == "__main__":
    ys = np.load("l96_obs.npy").astype(np.float32)
    filt = EnKF(ys)
    r = filt.run(ys.shape[0])
    print("mean spread", float(np.mean(r)))
