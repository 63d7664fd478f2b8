"""1D3V electrostatic/magnetised particle-in-cell: Boris push + CIC deposit.

Plasma-physics code translated from a Fortran PIC teaching code.  One PIC cycle
(gather, push, deposit, field solve) is captured; diagnostics run between replays.
"""
import numpy as np
import torch

NG = 1024
L_BOX = 100.0
DXG = L_BOX / NG
NP = 2_000_000
QM = -1.0
DT = 0.05
dev = torch.device("cuda")

x = torch.rand(NP, device=dev) * L_BOX
v = torch.randn(NP, 3, device=dev) * 0.1
q = torch.full((NP,), -L_BOX / NP, device=dev)
E = torch.zeros(NG, device=dev)
B = torch.tensor([0.0, 0.0, 0.3], device=dev)
rho = torch.zeros(NG, device=dev)
E_ext_host = torch.empty(NG).pin_memory()
E_ext = torch.zeros(NG, device=dev)
k = torch.fft.rfftfreq(NG, d=DXG).to(dev) * 2 * np.pi
lost_count = []


def gather(xp, field):
    s = xp / DXG
    i0 = s.floor().long() % NG
    f = s - s.floor()
    return field[i0] * (1 - f) + field[(i0 + 1) % NG] * f


def boris(vp, Ep):
    t = 0.5 * QM * DT * B
    s = 2 * t / (1 + (t * t).sum())
    vm = vp + 0.5 * QM * DT * Ep
    vprime = vm + torch.cross(vm, t.expand_as(vm), dim=1)
    vplus = vm + torch.cross(vprime, s.expand_as(vm), dim=1)
    return vplus + 0.5 * QM * DT * Ep


def cycle():
    E_ext.copy_(E_ext_host, non_blocking=True)  # CLEAN: pinned host buffer, the copy is recorded
    Ep = torch.zeros(NP, 3, device=dev)
    Ep[:, 0] = gather(x, E + E_ext)  # CLEAN: gather with CUDA long indices
    v.copy_(boris(v, Ep))
    x.add_(DT * v[:, 0])
    out = (x < 0) | (x >= L_BOX)
    lost_count.append(int(out.sum()))  # HAZARD: host-sync
    x.remainder_(L_BOX)  # CLEAN: periodic wrap, fixed shape
    inj = np.random.uniform(-0.01, 0.01)  # HAZARD: host-code
    v[:, 1].add_(inj)
    s = x / DXG
    i0 = s.floor().long() % NG
    f = s - s.floor()
    rho.zero_()
    rho.index_add_(0, i0, q * (1 - f))  # CLEAN: index_add_ with CUDA indices
    rho.index_add_(0, (i0 + 1) % NG, q * f)
    rho.div_(DXG).add_(1.0 / L_BOX)   # neutralising ion background
    rho_k = torch.fft.rfft(rho)
    phi_k = torch.where(k > 0, rho_k / (k * k).clamp_min(1e-12), torch.zeros_like(rho_k))
    E.copy_(torch.fft.irfft(-1j * k * phi_k, n=NG))


def set_external_field(amplitude, mode=3):
    global E_ext
    grid = np.arange(NG) * DXG
    E_ext = torch.from_numpy(amplitude * np.sin(2 * np.pi * mode * grid / L_BOX)).float().to(dev)  # HAZARD: static-address


ws = torch.cuda.Stream()
ws.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(ws):
    for _ in range(3):
        cycle()
torch.cuda.current_stream().wait_stream(ws)

g = torch.cuda.CUDAGraph()
g.capture_begin()  # HAZARD: stream
cycle()
g.capture_end()

energy = []
for n in range(5000):
    if n == 2000:
        set_external_field(0.05)
    g.replay()
    if n % 50 == 0:
        energy.append(0.5 * (E ** 2).sum().item() * DXG)
np.save("field_energy.npy", np.array(energy))
