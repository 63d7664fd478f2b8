"""2-D Ising model, checkerboard Metropolis on the GPU with simulated annealing.

Stats-mech group code; the C version used one CUDA kernel per colour.  Here a
sweep (both colours + measurement) is captured with capture_begin/capture_end.
"""
import math
import numpy as np
import torch

L = 512
J = 1.0
BETA = 0.30           # annealed in main loop
SWEEPS_PER_GRAPH = 10
dev = "cuda"

rng_gen = torch.Generator(device=dev)
rng_gen.manual_seed(1234)

spins = (torch.randint(0, 2, (L, L), device=dev) * 2 - 1).float()
mask_black = ((torch.arange(L, device=dev)[:, None] + torch.arange(L, device=dev)[None, :]) % 2 == 0)
mask_white = ~mask_black
mag_acc = torch.zeros((), device=dev)
ene_acc = torch.zeros((), device=dev)
mag_log = []


def neighbour_sum(s):
    return (torch.roll(s, 1, 0) + torch.roll(s, -1, 0) +
            torch.roll(s, 1, 1) + torch.roll(s, -1, 1))


def half_sweep(s, colour_mask):
    beta = BETA  # HAZARD: python-scalar
    dE = 2.0 * J * s * neighbour_sum(s)
    u = torch.rand(L, L, device=dev, generator=rng_gen)  # HAZARD: rng
    accept = (u < torch.exp(-beta * dE)) & colour_mask
    s.mul_(torch.where(accept, -1.0, 1.0))  # CLEAN: torch.where, no data-dependent shape


def sweep():
    for _ in range(SWEEPS_PER_GRAPH):
        half_sweep(spins, mask_black)
        half_sweep(spins, mask_white)
    m = spins.mean()
    e = -J * (spins * neighbour_sum(spins)).mean() / 2.0
    mag_acc.add_(m.abs())  # CLEAN: device-side accumulation
    ene_acc.add_(e)
    mag_log.append(m.item())  # HAZARD: host-sync


def thermalize():
    # plain default-generator kick before the capture, eager
    flip = torch.rand(L, L, device=dev) < 0.01  # CLEAN: default-generator CUDA RNG, outside the graph anyway
    spins[flip] *= -1


thermalize()
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(2):
        sweep()
torch.cuda.current_stream().wait_stream(s)
mag_acc.zero_()
ene_acc.zero_()

graph = torch.cuda.CUDAGraph()
graph.capture_begin()  # HAZARD: stream
sweep()
graph.capture_end()


def anneal(beta_start=0.30, beta_end=0.55, n_temps=26, n_meas=200):
    global BETA
    table = []
    for beta in np.linspace(beta_start, beta_end, n_temps):
        BETA = float(beta)
        mag_acc.zero_()
        ene_acc.zero_()
        for _ in range(n_meas):
            graph.replay()
        m = mag_acc.item() / n_meas  # CLEAN: read after the replays, outside the capture
        e = ene_acc.item() / n_meas
        table.append((beta, m, e))
        print(f"beta={beta:.3f}  |m|={m:.4f}  e={e:.4f}")
    return table


if __name__ == "__main__":
    t_c = 2.0 / math.log(1 + math.sqrt(2))
    print("exact Tc", t_c, "beta_c", 1 / t_c)
    res = anneal()
    np.savetxt("ising_L512.txt", np.array(res))
