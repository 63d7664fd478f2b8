"""Neural-reparameterised topology optimisation of a 2D heat-spreader (thermal compliance).

A CNN maps a learned latent to a density field; a volume-fraction offset is found by
bisection; the steady heat equation is solved matrix-free with a fixed number of CG
iterations. SIMP penalisation is continued from 1 to 3. Objective and optimizer step
are compiled with mode="max-autotune".
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def apply_A(T, kx, ky, fixed):
    T = T.masked_fill(fixed, 0.0)
    fx = kx * (T[:, 1:] - T[:, :-1])
    fy = ky * (T[1:, :] - T[:-1, :])
    out = F.pad(-fx, (0, 1)) + F.pad(fx, (1, 0)) + F.pad(-fy, (0, 0, 0, 1)) + F.pad(fy, (0, 0, 1, 0))
    return out.masked_fill(fixed, 0.0)


def cg_solve(kx, ky, q, fixed, iters=150):
    T = torch.zeros_like(q)
    r = q.masked_fill(fixed, 0.0)
    p, rs = r.clone(), (r * r).sum()
    for _ in range(iters):
        Ap = apply_A(p, kx, ky, fixed)
        alpha = rs / (p * Ap).sum().clamp_min(1e-30)  # CLEAN: step size stays a device scalar
        T, r = T + alpha * p, r - alpha * Ap
        rs_new = (r * r).sum()
        p, rs = r + (rs_new / rs.clamp_min(1e-30)) * p, rs_new
    return T


class HeatSpreader(nn.Module):
    def __init__(self, nely=64, nelx=128, vf=0.35):
        super().__init__()
        self.z = nn.Parameter(0.1 * torch.randn(1, 32, nely // 8, nelx // 8))
        self.gen = nn.Sequential(*[nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear"),
                                                 nn.Conv2d(32, 32, 5, padding=2), nn.Tanh()) for _ in range(3)],
                                 nn.Conv2d(32, 1, 5, padding=2))
        self.vf, self.penal = vf, 1.0
        self.register_buffer("q", torch.full((nely, nelx), 1.0 / (nely * nelx)))
        fixed = torch.zeros(nely, nelx, dtype=torch.bool)
        fixed[-1, nelx // 2 - 4: nelx // 2 + 4] = True                    # heat sink on the bottom edge
        self.register_buffer("fixed", fixed)

    def density(self):
        logits = self.gen(self.z)[0, 0]
        lb, ub = -30.0, 30.0
        while ub - lb > 1e-3:
            mid = 0.5 * (lb + ub)
            if torch.sigmoid(logits + mid).mean() > self.vf:  # HAZARD: dynamic-control-flow
                ub = mid
            else:
                lb = mid
        return torch.sigmoid(logits + 0.5 * (lb + ub))

    def compliance(self, rho):
        penal = self.penal  # HAZARD: python-scalar
        k = 1e-3 + rho.pow(penal) * (1.0 - 1e-3)
        kx = 2 * k[:, 1:] * k[:, :-1] / (k[:, 1:] + k[:, :-1])
        ky = 2 * k[1:, :] * k[:-1, :] / (k[1:, :] + k[:-1, :])
        return (self.q * cg_solve(kx, ky, self.q, self.fixed)).sum()


class TopOptRunner:
    def __init__(self, problem, verbose=True):
        self.problem = problem.cuda()
        self.verbose = verbose
        self.objective = torch.compile(self._objective, mode="max-autotune")
        self.check = torch.compile(self.problem.compliance)                  # default mode, for reporting
        self.opt = torch.optim.Adam(self.problem.parameters(), lr=3e-3)
        self.opt_step = torch.compile(self.opt.step, mode="max-autotune")
        self.frames = []

    def _objective(self):
        rho = self.problem.density()
        c = self.problem.compliance(rho)
        if self.verbose:
            print(f"thermal compliance {c:.5e}")  # HAZARD: host-code
        return c, rho

    def run(self, iters=300):
        for it in range(iters):
            self.problem.penal = min(3.0, 1.0 + it / 50)
            c, rho = self.objective()
            self.opt.zero_grad(set_to_none=True)
            c.backward()
            self.opt_step()
            if it % 10 == 0:
                self.frames.append(rho)  # HAZARD: static-address
            if it == 150:
                for group in self.opt.param_groups:
                    group["lr"] = 1e-3  # HAZARD: optimizer
        with torch.no_grad():
            final = self.problem.density().clone()
            print(f"final compliance {self.check(final):.5e}")  # CLEAN: print outside the compiled regions
        return final, self.frames
