"""Variational Monte Carlo for a small molecule with a neural Jastrow wavefunction.

One training iteration = Metropolis sweeps over the walkers, local energies via
autograd Laplacian, the standard VMC gradient estimator and an Adam update.
The whole iteration is captured once and replayed.
"""
import torch
import torch.nn as nn


class JastrowPsi(nn.Module):
    """log|psi(r)| for n_el electrons around fixed nuclei."""

    def __init__(self, nuclei, charges, n_el, hidden=64):
        super().__init__()
        self.register_buffer("nuclei", nuclei)
        self.register_buffer("charges", charges)
        self.register_buffer("iu", torch.triu_indices(n_el, n_el, 1))
        d_in = n_el * len(charges) + n_el * (n_el - 1) // 2
        self.mlp = nn.Sequential(nn.Linear(d_in, hidden), nn.Tanh(), nn.Linear(hidden, hidden),
                                 nn.Tanh(), nn.Linear(hidden, 1))

    def distances(self, r):
        ren = (r.unsqueeze(2) - self.nuclei).norm(dim=-1)             # (W, n_el, n_nuc)
        ree = (r[:, self.iu[0]] - r[:, self.iu[1]]).norm(dim=-1)       # (W, n_pairs)
        return ren, ree

    def forward(self, r):
        ren, ree = self.distances(r)
        cusp = -(self.charges * ren).sum((1, 2)) + 0.5 * (ree / (1.0 + ree)).sum(1)
        return self.mlp(torch.exp(-torch.cat([ren.flatten(1), ree], 1))).squeeze(-1) + cusp

    def potential(self, r):
        ren, ree = self.distances(r)
        return -(self.charges / ren).sum((1, 2)) + (1.0 / ree).sum(1)


def local_energy(psi, r):
    r = r.detach().requires_grad_(True)
    grad = torch.autograd.grad(psi(r).sum(), r, create_graph=True)[0].flatten(1)
    lap = torch.zeros(r.shape[0], device=r.device)
    for i in range(grad.shape[1]):
        lap = lap + torch.autograd.grad(grad[:, i].sum(), r, retain_graph=True)[0].flatten(1)[:, i]
    return (-0.5 * (lap + grad.pow(2).sum(1)) + psi.potential(r)).detach()


class VMCTrainer:
    def __init__(self, psi, n_walkers=4096, n_el=4, device="cuda"):
        self.psi = psi.to(device)
        self.opt = torch.optim.Adam(self.psi.parameters(), lr=3e-4)
        self.walkers = torch.randn(n_walkers, n_el, 3, device=device)
        self.step_width = 0.25
        self.n_sweeps = 10
        self.prop_gen = torch.Generator(device=device)
        self.prop_gen.manual_seed(17)
        self.accept_gen = torch.Generator(device=device)
        self.accept_gen.manual_seed(23)
        self.graph = torch.cuda.CUDAGraph()
        self.graph.register_generator_state(self.accept_gen)

    @torch.no_grad()
    def _sweep(self):
        width = self.step_width  # HAZARD: python-scalar
        logp = 2.0 * self.psi(self.walkers)
        acc = torch.zeros((), device=self.walkers.device)
        for _ in range(self.n_sweeps):
            step = torch.randn(self.walkers.shape, device=self.walkers.device, generator=self.prop_gen)  # HAZARD: rng
            prop = self.walkers + width * step
            logp_new = 2.0 * self.psi(prop)
            u = torch.rand(logp.shape, device=logp.device, generator=self.accept_gen)  # CLEAN: generator registered with the graph
            accept = u.log() < (logp_new - logp)
            self.walkers.copy_(torch.where(accept[:, None, None], prop, self.walkers))  # CLEAN: torch.where + in-place update
            logp = torch.where(accept, logp_new, logp)
            acc += accept.float().mean()
        return acc / self.n_sweeps

    def _step(self):
        acc = self._sweep()
        e_loc = local_energy(self.psi, self.walkers)
        if torch.isnan(e_loc).any():  # HAZARD: dynamic-control-flow
            e_loc = torch.nan_to_num(e_loc, nan=0.0, posinf=0.0, neginf=0.0)
        med = e_loc.median()
        spread = (e_loc - med).abs().mean()
        e_clip = e_loc.clamp(med - 5.0 * spread, med + 5.0 * spread)  # CLEAN: clipping bounds stay on the device
        loss = 2.0 * ((e_clip - e_clip.mean()) * self.psi(self.walkers)).mean()
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.opt.step()  # HAZARD: optimizer
        return e_loc.mean(), acc

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self.static_energy, self.static_acc = self._step()

    def run(self, n_iter=20000):
        self.capture()
        history = []
        for it in range(n_iter):
            self.graph.replay()
            acc = self.static_acc.item()  # CLEAN: read after replay, outside the graph
            self.step_width *= 1.05 if acc > 0.55 else 0.95
            if it % 100 == 0:
                history.append(self.static_energy.item())
        return history
