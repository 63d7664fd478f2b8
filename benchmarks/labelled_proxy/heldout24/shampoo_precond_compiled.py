"""Shampoo-lite for the 2-D weights of a recommendation tower.

Kronecker statistics L = sum G G^T and R = sum G^T G are accumulated every step; the
inverse fourth roots are refreshed eagerly every `root_every` steps.  The statistics
update and the preconditioned direction are compiled with inductor CUDA graphs.
"""
import torch
import torch.nn as nn

CG = {"triton.cudagraphs": True}


def _inv_root(mat, eps=1e-6):
    vals, vecs = torch.linalg.eigh(mat + eps * torch.eye(mat.shape[0], device=mat.device))
    return vecs @ torch.diag(vals.clamp_min(eps) ** -0.25) @ vecs.T


class KronStats(nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.register_buffer("L", torch.zeros(shape[0], shape[0]))
        self.register_buffer("R", torch.zeros(shape[1], shape[1]))
        self.register_buffer("L_root", torch.eye(shape[0]))
        self.register_buffer("R_root", torch.eye(shape[1]))

    def forward(self, g, beta2: float):
        if g.abs().max() == 0:  # HAZARD: dynamic-control-flow
            return g
        self.L.mul_(beta2).add_(g @ g.T, alpha=1 - beta2)  # CLEAN: registered buffer, static input
        self.R.mul_(beta2).add_(g.T @ g, alpha=1 - beta2)
        return self.L_root @ g @ self.R_root


@torch.compile(options=CG)
def precondition_loose(g, L, R, L_root, R_root, beta2: float):
    L.mul_(beta2).add_(g @ g.T, alpha=1 - beta2)  # HAZARD: static-address
    R.mul_(beta2).add_(g.T @ g, alpha=1 - beta2)
    return L_root @ g @ R_root


class ShampooLite:
    def __init__(self, params, lr=1e-3, beta2=0.99, root_every=50, graft_eps=1e-8, loose=False):
        self.params = [p for p in params if p.ndim == 2]
        self.group = {"lr": lr, "beta2": beta2}
        self.root_every = root_every
        self.step_count = 0
        self.loose = loose
        self.stats = [KronStats(p.shape).to(p.device) for p in self.params]
        self.compiled = [torch.compile(s, options=CG) for s in self.stats]
        self.lr_t = torch.tensor(lr, device=self.params[0].device)
        self.direction = torch.compile(self._direction, options=CG)

    def _direction(self, pre, g):
        scale = g.norm() / (pre.norm() + 1e-12)  # CLEAN: grafting norm kept on the device
        if self.step_count % self.root_every == 0:  # HAZARD: python-scalar
            scale = scale.clamp(max=10.0)
        return pre * scale

    @torch.no_grad()
    def step(self):
        refresh = self.step_count % self.root_every == 0  # CLEAN: eager host bookkeeping
        for p, st, comp in zip(self.params, self.stats, self.compiled):
            g = p.grad
            if self.loose:
                pre = precondition_loose(g, st.L, st.R, st.L_root, st.R_root, self.group["beta2"])
            else:
                pre = comp(g, self.group["beta2"])
            upd = self.direction(pre.clone(), g)  # CLEAN: cloned before another compiled call
            p.add_(upd, alpha=-self.group["lr"])
            if refresh:
                st.L_root.copy_(_inv_root(st.L))  # CLEAN: eager refresh, outside the compiled code
                st.R_root.copy_(_inv_root(st.R))
        self.step_count += 1

    def set_lr(self, lr):
        self.group["lr"] = lr  # CLEAN: read only by the eager p.add_ call
        self.lr_t.fill_(lr)


def train(model, loader, epochs=3):
    opt = ShampooLite(model.parameters())
    for epoch in range(epochs):
        for x, y in loader:
            loss = nn.functional.binary_cross_entropy_with_logits(model(x.cuda()), y.cuda())
            loss.backward()
            opt.step()
            model.zero_grad(set_to_none=False)
        opt.set_lr(opt.group["lr"] * 0.5)
