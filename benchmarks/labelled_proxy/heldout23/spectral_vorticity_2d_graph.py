"""Pseudo-spectral 2-D Navier-Stokes (vorticity form), Kolmogorov forcing.

Fortran/FFTW port by a turbulence postdoc.  One RK2 step with 2/3 dealiasing is
captured; the CFL check was kept inside the step as in the original code.
"""
import logging
import math
import numpy as np
import torch

log = logging.getLogger("ns2d")
NG = 512
LBOX = 2 * math.pi
NU = 1.0e-4
DT = 5.0e-4
KF = 4
DX = LBOX / NG
dev = "cuda"

k1d = torch.fft.fftfreq(NG, d=1.0 / NG).to(dev)
kr = torch.fft.rfftfreq(NG, d=1.0 / NG).to(dev)
KX, KY = torch.meshgrid(k1d, kr, indexing="ij")
K2 = KX ** 2 + KY ** 2
K2_INV = torch.where(K2 > 0, 1.0 / K2, torch.zeros_like(K2))
dealias_np = ((np.abs(np.fft.fftfreq(NG, 1.0 / NG))[:, None] < NG / 3) &
              (np.fft.rfftfreq(NG, 1.0 / NG)[None, :] < NG / 3)).astype(np.float32)
DEALIAS = torch.from_numpy(dealias_np).to(dev)
y = torch.linspace(0, LBOX, NG + 1, device=dev)[:-1]
FORCE_HAT = torch.fft.rfft2((KF * torch.cos(KF * y))[:, None].expand(NG, NG).contiguous())


class Solver:
    def __init__(self, w0):
        self.w = w0.to(dev)
        self.w_hat = torch.fft.rfft2(self.w)
        self.graph = torch.cuda.CUDAGraph()

    def rhs(self, w_hat):
        psi_hat = w_hat * K2_INV
        u = torch.fft.irfft2(1j * KY * psi_hat, s=(NG, NG))
        v = torch.fft.irfft2(-1j * KX * psi_hat, s=(NG, NG))
        wx = torch.fft.irfft2(1j * KX * w_hat, s=(NG, NG))
        wy = torch.fft.irfft2(1j * KY * w_hat, s=(NG, NG))
        mask = torch.from_numpy(dealias_np).to(dev)  # HAZARD: pinned-memory
        adv = torch.fft.rfft2(u * wx + v * wy) * mask
        return -adv - NU * K2 * w_hat + FORCE_HAT, u, v

    def step(self):
        w_hat = torch.fft.rfft2(self.w)
        r1, u, v = self.rhs(w_hat)
        umax = torch.sqrt(u ** 2 + v ** 2).max()
        if umax * DT / DX > 1.0:  # HAZARD: dynamic-control-flow
            log.warning("CFL violated")
        w1 = w_hat + DT * r1
        r2, _, _ = self.rhs(w1)
        w_new = (w_hat + 0.5 * DT * (r1 + r2)) * DEALIAS  # CLEAN: precomputed device mask
        self.w_hat.copy_(w_new)  # CLEAN: copy_ into a persistent buffer
        self.w = torch.fft.irfft2(w_new, s=(NG, NG))  # HAZARD: static-address
        print(f"enstrophy {0.5 * (self.w ** 2).mean():.5e}")  # HAZARD: host-sync
        log.debug("rk2 step done")  # CLEAN: plain string, no tensor formatted

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self.step()


def main(t_end=50.0, out_every=2000):
    w0 = torch.from_numpy(np.load("w0_512.npy"))
    sol = Solver(w0)
    sol.capture()
    for n in range(int(t_end / DT)):
        sol.graph.replay()
        if n % out_every == 0:
            w = torch.fft.irfft2(sol.w_hat, s=(NG, NG))
            np.save(f"w_{n:07d}.npy", w.cpu().numpy())  # CLEAN: eager, between replays


if __name__ == "__main__":
    main()
