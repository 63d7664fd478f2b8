"""Koopman autoencoder (in the spirit of Lusch, Kutz & Brunton 2018) for the POD coefficients
of the cylinder wake at Re=100 -- research prototype.

Encode the current state, advance the latent with the linear Koopman operator K for
`horizon` steps and decode; an ensemble of perturbed initial states gives a spread.
The whole rollout is captured once as a CUDA graph.
"""
import numpy as np
import torch
import torch.nn as nn

STATE, LATENT, H_MAX, ENS = 64, 32, 200, 16


class KoopmanAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(STATE, 128), nn.Tanh(), nn.Linear(128, 128), nn.Tanh(), nn.Linear(128, LATENT))
        self.dec = nn.Sequential(nn.Linear(LATENT, 128), nn.Tanh(), nn.Linear(128, 128), nn.Tanh(), nn.Linear(128, STATE))
        self.K = nn.Parameter(torch.eye(LATENT) + 0.01 * torch.randn(LATENT, LATENT))

    def step(self, z):
        return z @ self.K.T


class Forecaster:
    def __init__(self, model, horizon=60, sensor_std=None):
        self.model = model.cuda().eval()
        self.horizon = horizon
        self.sensor_std = sensor_std if sensor_std is not None else np.full(STATE, 0.01, np.float32)
        self.x0 = torch.zeros(1, STATE, device="cuda")
        self.traj = torch.zeros(ENS, H_MAX, STATE, device="cuda")
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(7)
        self.graph = torch.cuda.CUDAGraph()

    def set_horizon(self, h):
        self.horizon = min(h, H_MAX)

    @torch.no_grad()
    def _rollout(self):
        std = torch.as_tensor(self.sensor_std, device="cuda")  # HAZARD: pinned-memory
        x = self.x0 + std * torch.randn(ENS, STATE, device="cuda", generator=self.gen)  # HAZARD: rng
        z = self.model.enc(x)
        H = self.horizon  # HAZARD: python-scalar
        outs = []
        for _ in range(H):
            z = self.model.step(z)
            outs.append(self.model.dec(z))
        self.traj[:, :H].copy_(torch.stack(outs, 1))

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._rollout()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self._rollout()

    def forecast(self, state_np):
        self.x0.copy_(torch.from_numpy(state_np).view(1, STATE))  # CLEAN: copy_ into the static input, outside the graph
        self.graph.replay()
        return self.traj[:, :self.horizon].cpu().numpy()

    def refit_operator(self, snapshots):
        """Re-estimate K by least squares on the latents of fresh snapshots (DMD in latent space)."""
        with torch.no_grad():
            z = self.model.enc(torch.as_tensor(snapshots, device="cuda"))  # CLEAN: eager upload, not inside the captured rollout
            sol = torch.linalg.lstsq(z[:-1], z[1:]).solution  # CLEAN: least squares runs eagerly, outside the graph
        self.model.K = nn.Parameter(sol.T.contiguous())  # HAZARD: static-address

    def nudge_operator(self, K_new):
        with torch.no_grad():
            self.model.K.copy_(K_new)  # CLEAN: in-place update keeps the captured address


if __name__ == "__main__":
    data = np.load("cylinder_pod_coeffs.npy").astype(np.float32)          # T x STATE
    model = KoopmanAE()
    model.load_state_dict(torch.load("koopman_ae.pt", map_location="cpu"))
    fc = Forecaster(model, horizon=60, sensor_std=data.std(0) * 0.02)
    fc.capture()
    rmse = []
    for t0 in range(0, len(data) - H_MAX - 1, 50):
        pred = fc.forecast(data[t0])
        truth = data[t0 + 1:t0 + 1 + fc.horizon]
        rmse.append(float(np.sqrt(((pred.mean(0) - truth) ** 2).mean())))
        if t0 == 500:
            fc.set_horizon(120)              # longer lead time for the second half of the evaluation
        if t0 > 0 and t0 % 1000 == 0:
            fc.refit_operator(data[t0 - 1000:t0])
    print("mean RMSE", np.mean(rmse))
