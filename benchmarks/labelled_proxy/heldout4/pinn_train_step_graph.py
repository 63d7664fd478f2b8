"""Physics-informed network for the 1-D viscous Burgers equation, whole step in one CUDA graph.

Collocation points are resampled on the device every step; the PDE residual
uses double autograd; loss weights are re-balanced every few hundred steps.
"""
import math

import torch
import torch.nn as nn

NU = 0.01 / math.pi


class PINN(nn.Module):
    def __init__(self, width=64, depth=6):
        super().__init__()
        layers, d = [], 2
        for _ in range(depth):
            layers += [nn.Linear(d, width), nn.Tanh()]
            d = width
        self.net = nn.Sequential(*layers, nn.Linear(d, 1))

    def forward(self, xt):
        return self.net(xt)


class BurgersTrainer:
    def __init__(self, model: PINN, n_col=8192, n_bc=512):
        self.model = model.cuda()
        self.n_col, self.n_bc = n_col, n_bc
        self.opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=True)
        self.sched = torch.optim.lr_scheduler.ExponentialLR(self.opt, gamma=0.9995)
        self.lam_bc = 10.0
        self.bc_stream = torch.cuda.Stream()
        self.losses = torch.zeros(2, device="cuda")
        self.span = torch.tensor([2.0, 1.0], device="cuda")
        self.lo = torch.tensor([1.0, 0.0], device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    def _residual(self):
        xt = torch.rand(self.n_col, 2, device="cuda") * self.span - self.lo  # CLEAN: resampled on the device with the default generator
        xt.requires_grad_(True)
        u = self.model(xt)
        du = torch.autograd.grad(u.sum(), xt, create_graph=True)[0]
        u_x, u_t = du[:, :1], du[:, 1:]
        u_xx = torch.autograd.grad(u_x.sum(), xt, create_graph=True)[0][:, :1]
        return (u_t + u * u_x - NU * u_xx).pow(2).mean()  # CLEAN: NU is a module constant

    def _boundary_loss(self):
        t = torch.rand(self.n_bc, 1, device="cuda")
        x0 = torch.rand(self.n_bc, 1, device="cuda") * 2 - 1
        ic = self.model(torch.cat([x0, torch.zeros_like(x0)], 1)) + torch.sin(math.pi * x0)
        left = self.model(torch.cat([-torch.ones_like(t), t], 1))
        right = self.model(torch.cat([torch.ones_like(t), t], 1))
        return ic.pow(2).mean() + left.pow(2).mean() + right.pow(2).mean()

    def _step(self):
        self.opt.zero_grad(set_to_none=True)
        pde = self._residual()
        with torch.cuda.stream(self.bc_stream):  # HAZARD: stream
            bc = self._boundary_loss()
        loss = pde + self.lam_bc * bc  # HAZARD: python-scalar
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), 1.0, error_if_nonfinite=True)  # HAZARD: host-sync
        self.opt.step()  # CLEAN: Adam is capturable
        self.losses.copy_(torch.stack([pde.detach(), bc.detach()]))

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(5):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self._step()

    def train(self, n_iters, rebalance_every=200):
        self.capture()
        for it in range(n_iters):
            self.graph.replay()
            self.sched.step()  # HAZARD: optimizer
            if it % rebalance_every == 0:
                pde, bc = self.losses.tolist()  # CLEAN: host read between replays
                self.lam_bc = min(100.0, max(1.0, pde / max(bc, 1e-8)))
