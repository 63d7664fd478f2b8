"""Monte Carlo photon transport through a plane-parallel scattering slab.

Atmospheric-optics code from a Fortran77 original.  A batch of photons is traced
for a fixed number of events; the event loop is captured with torch.cuda.graph.
"""
import math
import numpy as np
import torch

TAU_SLAB = 2.0
ALBEDO = 0.9
G_ASYM = 0.85
N_PH = 1 << 20
MAX_EVENTS = 64
MU_TABLE = np.cos(np.linspace(0, math.pi, 181)).astype(np.float32)
dev = torch.device("cuda")

gen_path = torch.Generator(device=dev)
gen_path.manual_seed(11)
gen_angle = torch.Generator(device=dev)
gen_angle.manual_seed(12)

z = torch.zeros(N_PH, device=dev)
mu = torch.ones(N_PH, device=dev)
w = torch.ones(N_PH, device=dev)
refl = torch.zeros((), device=dev)
trans = torch.zeros((), device=dev)
top_weights = torch.zeros(N_PH, device=dev)


def hg_sample(u, g):
    s = (1 - g * g) / (1 - g + 2 * g * u)
    return (1 + g * g - s * s) / (2 * g)


def trace():
    z.zero_()
    mu.fill_(1.0)
    w.fill_(1.0)
    alive = torch.ones(N_PH, dtype=torch.bool, device=dev)
    mu_tab = torch.from_numpy(MU_TABLE).to(dev, non_blocking=True)  # HAZARD: pinned-memory
    n_ev = 0
    while alive.any() and n_ev < MAX_EVENTS:  # HAZARD: dynamic-control-flow
        u1 = torch.rand(N_PH, device=dev, generator=gen_path)  # HAZARD: rng
        step = -torch.log(u1.clamp_min(1e-12))
        z.add_(mu * step)
        up = z < 0
        down = z > TAU_SLAB
        refl.add_((w * up * alive).sum())
        trans.add_((w * down * alive).sum())
        alive &= ~(up | down)
        w.mul_(ALBEDO)
        w[~alive] = 0.0  # CLEAN: bool-mask assignment of a scalar is capturable
        u2 = torch.rand(N_PH, device=dev, generator=gen_angle)  # CLEAN: gen_angle is registered with the graph
        cos_t = hg_sample(u2, G_ASYM)
        phi = 2 * math.pi * torch.rand(N_PH, device=dev)  # CLEAN: default CUDA generator is captured
        mu.copy_(mu * cos_t + torch.sqrt((1 - mu * mu).clamp_min(0) * (1 - cos_t * cos_t).clamp_min(0)) * torch.cos(phi))
        n_ev += 1
    escaped_top = (z < 0) & (w > 0)
    top_w = w[escaped_top]  # HAZARD: dynamic-shape
    top_weights[: top_w.numel()].copy_(top_w)
    torch.cuda.synchronize()  # HAZARD: host-sync
    return mu_tab


def main(n_batches=50):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            trace()
    torch.cuda.current_stream().wait_stream(s)
    refl.zero_()
    trans.zero_()
    g = torch.cuda.CUDAGraph()
    g.register_generator_state(gen_angle)
    with torch.cuda.graph(g):
        trace()
    for _ in range(n_batches):
        g.replay()
    R = refl.item() / (n_batches * N_PH)  # CLEAN: read after all replays
    T = trans.item() / (n_batches * N_PH)
    print(f"tau={TAU_SLAB} a={ALBEDO} g={G_ASYM}  R={R:.4f} T={T:.4f} A={1 - R - T:.4f}")


if __name__ == "__main__":
    main()
