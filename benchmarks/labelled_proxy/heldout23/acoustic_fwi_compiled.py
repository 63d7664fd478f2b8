"""2-D acoustic full-waveform inversion (multiscale, Bunks et al.) on a Marmousi crop.

Exploration-geophysics research code (ex-Madagascar/Fortran).  The misfit for one
shot gather is compiled with mode="max-autotune"; the Adam step is compiled with
options={"triton.cudagraphs": True}.  Frequency bands go from 3 Hz to 12 Hz.
"""
import logging
import numpy as np
import torch
import torch.nn.functional as F

log = logging.getLogger("fwi")
dev = "cuda"
NZ, NX = 188, 600
DX = 10.0
DT = 1.0e-3
NT = 2000
VMIN, VMAX = 1500.0, 4700.0
LAP = torch.tensor([[0, 1, 0], [1, -4, 1], [0, 1, 0]], dtype=torch.float32, device=dev).view(1, 1, 3, 3)

v_init = torch.from_numpy(np.load("marmousi_smooth.npy").astype(np.float32)).to(dev)
vel = torch.nn.Parameter(v_init.clone())
observed = torch.from_numpy(np.load("marmousi_shots.npy").astype(np.float32)).to(dev)   # (n_shots, NT, NX)
src_x = np.linspace(20, NX - 20, observed.shape[0]).astype(int)
src_rows = torch.eye(NX, device=dev)[torch.from_numpy(src_x).to(dev)]      # one-hot source positions


class Band:
    def __init__(self):
        self.freq = 3.0


band = Band()


def ricker(f0, t):
    a = (np.pi * f0 * (t - 1.2 / f0)) ** 2
    return (1 - 2 * a) * torch.exp(-a)


def misfit(v, d_obs, src_row):
    f0 = band.freq  # HAZARD: python-scalar
    t = torch.arange(NT, device=v.device) * DT
    wav = ricker(f0, t)
    u_prev = torch.zeros(1, 1, NZ, NX, device=v.device)
    u = torch.zeros_like(u_prev)
    c2 = (v * DT / DX) ** 2
    rec = []
    for it in range(NT):
        lap = F.conv2d(u, LAP, padding=1)
        u_next = 2 * u - u_prev + c2 * lap
        u_next[0, 0, 2, :] += wav[it] * DT ** 2 * src_row  # CLEAN: one-hot device row, no Python index
        u_prev, u = u, u_next
        rec.append(u[0, 0, 2, :])
    d_syn = torch.stack(rec)
    loss = 0.5 * ((d_syn - d_obs) ** 2).sum()
    if not torch.isfinite(loss):  # HAZARD: dynamic-control-flow
        loss = torch.zeros_like(loss)
    log.debug("shot misfit %s", loss)  # HAZARD: host-code
    return loss


misfit_c = torch.compile(misfit, mode="max-autotune")
opt = torch.optim.Adam([vel], lr=torch.tensor(20.0, device=dev), capturable=True)
step_c = torch.compile(opt.step, options={"triton.cudagraphs": True})


def lowpass(d, f_hi):
    spec = torch.fft.rfft(d, dim=0)
    freqs = torch.fft.rfftfreq(NT, DT).to(d.device)
    return torch.fft.irfft(spec * (freqs <= f_hi)[:, None], n=NT, dim=0)


for f_hi in (3.0, 5.0, 8.0, 12.0):
    band.freq = f_hi / 2.0
    d_band = torch.stack([lowpass(d, f_hi) for d in observed])
    for it in range(40):
        for k in range(len(src_x)):
            loss = misfit_c(vel, d_band[k], src_rows[k])
            loss.backward()
        step_c()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            vel.clamp_(VMIN, VMAX)  # CLEAN: eager, outside the compiled functions
    opt.param_groups[0]["lr"].fill_(opt.param_groups[0]["lr"] * 0.7)  # CLEAN: tensor LR updated in place
    for g in opt.param_groups:
        g["weight_decay"] = 1e-4 * f_hi  # HAZARD: optimizer
    np.save(f"vel_{int(f_hi)}Hz.npy", vel.detach().cpu().numpy())
