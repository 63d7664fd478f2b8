"""Deep Lagrangian Networks (DeLaN) for a 7-DoF arm's inverse dynamics.

The mass matrix H(q) = L L^T comes from a Cholesky network, the potential V(q) from a second
MLP; torques follow the Euler-Lagrange equation via autograd. The whole training step is
captured once and replayed for every batch of logged joint trajectories.
"""
import numpy as np
import torch
import torch.nn as nn


class DeLaN(nn.Module):
    def __init__(self, n=7, hid=128):
        super().__init__()
        self.n = n
        self.trunk = nn.Sequential(nn.Linear(n, hid), nn.Softplus(), nn.Linear(hid, hid), nn.Softplus())
        self.diag = nn.Linear(hid, n)
        self.off = nn.Linear(hid, n * n)
        self.pot = nn.Sequential(nn.Linear(n, hid), nn.Softplus(), nn.Linear(hid, 1))
        self.fric = nn.Parameter(torch.zeros(n))                          # viscous friction

    def forward(self, q, qd, qdd):
        q = q.detach().requires_grad_(True)
        z = self.trunk(q)
        L = torch.diag_embed(nn.functional.softplus(self.diag(z)) + 1e-3)
        L = L + self.off(z).view(-1, self.n, self.n).tril(-1)
        H = L @ L.transpose(1, 2)
        Hqd = (H @ qd.unsqueeze(-1)).squeeze(-1)
        kin = 0.5 * (qd * Hqd).sum()
        u = torch.zeros_like(Hqd, requires_grad=True)
        jtu = torch.autograd.grad((Hqd * u).sum(), q, create_graph=True)[0]
        Hdot_qd = torch.autograd.grad((jtu * qd).sum(), u, create_graph=True)[0]     # J(Hqd) qd
        dT = torch.autograd.grad(kin, q, create_graph=True)[0]
        dV = torch.autograd.grad(self.pot(q).sum(), q, create_graph=True)[0]
        Hqdd = (H @ qdd.unsqueeze(-1)).squeeze(-1)
        return Hqdd + Hdot_qd - dT + dV + self.fric * qd


class DynamicsTrainer:
    def __init__(self, model, batch=512, n=7):
        self.model = model.cuda()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=1e-5)
        self.noise_gen = torch.Generator(device="cuda").manual_seed(3)
        self.w_fric = 0.0                                    # friction regulariser, warmed up over epochs
        self.static = {k: torch.zeros(batch, n, device="cuda") for k in ("q", "qd", "qdd", "tau")}
        self.static_loss = torch.zeros((), device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    def _step(self):
        s = self.static
        tau = s["tau"] + 0.02 * torch.randn(s["tau"].shape, device="cuda", generator=self.noise_gen)  # HAZARD: rng
        with torch.random.fork_rng(devices=[torch.cuda.current_device()]):  # CLEAN: fork_rng reads and restores the same CUDA state
            keep = (torch.rand(s["q"].shape[0], 1, device="cuda") > 0.1).float()
        pred = self.model(s["q"], s["qd"], s["qdd"])
        w_fric = self.w_fric  # HAZARD: python-scalar
        loss = ((pred - tau) ** 2 * keep).mean() + w_fric * self.model.fric.abs().sum()
        if not torch.isfinite(loss):  # HAZARD: dynamic-control-flow
            return
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 10.0)  # CLEAN: clip_grad_norm_ is sync-free
        self.opt.step()  # HAZARD: optimizer
        self.static_loss.copy_(loss.detach())

    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph):
            self._step()

    def fit(self, logs, epochs=50):
        for epoch in range(epochs):
            self.w_fric = min(1e-3, 1e-4 * epoch)
            for batch in logs:
                for k, v in batch.items():
                    self.static[k].copy_(v)  # CLEAN: copy_ into the static inputs
                self.graph.replay()


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    logs = [{k: torch.from_numpy(rng.standard_normal((512, 7)).astype(np.float32)).cuda()
             for k in ("q", "qd", "qdd", "tau")} for _ in range(40)]
    trainer = DynamicsTrainer(DeLaN())
    trainer.capture()
    trainer.fit(logs)
