"""Simulated cross-silo federated learning (FedAvg + FedProx) on one GPU.

Each client owns a model copy, a compiled FedProx objective and a compiled
optimizer step; the server averages client weights every round.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("fed")
CG = {"triton.cudagraphs": True}


class FedProxObjective(nn.Module):
    def __init__(self, model: nn.Module, mu=0.01, max_drift=5.0):
        super().__init__()
        self.model, self.mu, self.max_drift = model, mu, max_drift
        self.n = len(list(model.parameters()))
        for i, p in enumerate(model.parameters()):
            self.register_buffer(f"anchor{i}", p.detach().clone())

    def anchors(self):
        return [getattr(self, f"anchor{i}") for i in range(self.n)]

    def reset_anchor(self):
        with torch.no_grad():
            for a, p in zip(self.anchors(), self.model.parameters()):
                a.copy_(p)

    def forward(self, x, y):
        loss = F.cross_entropy(self.model(x), y)
        prox = torch.stack([((p - a) ** 2).sum() for p, a in zip(self.model.parameters(), self.anchors())]).sum()
        if prox > self.max_drift:  # HAZARD: dynamic-control-flow
            loss = loss + 10.0 * (prox - self.max_drift)
        log.info("local loss %s prox %s", loss.detach(), prox.detach())  # HAZARD: host-code
        return loss + 0.5 * self.mu * prox  # CLEAN: mu is fixed for the whole federation


class FedClient:
    def __init__(self, cid, model: nn.Module, objective, loader, lr=0.05):
        self.cid, self.model, self.objective, self.loader = cid, model, objective, loader
        self.opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        self._opt_step = torch.compile(self.opt.step, options=CG)

    def receive(self, global_state):
        self.model.load_state_dict(global_state)  # CLEAN: load_state_dict copies into the existing parameters
        self.objective.reset_anchor()

    def receive_fast(self, global_params):
        with torch.no_grad():
            for p, g in zip(self.model.parameters(), global_params):
                p.data = g.clone()  # HAZARD: static-address
        self.objective.reset_anchor()

    def local_train(self, epochs, round_lr):
        for group in self.opt.param_groups:
            group["lr"] = round_lr  # HAZARD: optimizer
        n = 0
        for _ in range(epochs):
            for x, y in self.loader:
                loss = self.objective(x.cuda(non_blocking=True), y.cuda(non_blocking=True))
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                self._opt_step()
                n += x.shape[0]
        return n


def make_client(cid, model_fn, loader):
    model = model_fn().cuda()
    objective = torch.compile(FedProxObjective(model), options=CG)
    return FedClient(cid, model, objective, loader)


def run_rounds(clients, global_model, rounds=100, local_epochs=2, lr0=0.05):
    for r in range(rounds):
        params = [p.detach().clone() for p in global_model.parameters()]
        sizes = []
        for c in clients:
            c.receive_fast(params)
            sizes.append(c.local_train(local_epochs, lr0 * 0.98 ** r))
        total = float(sum(sizes))
        with torch.no_grad():
            for i, gp in enumerate(global_model.parameters()):
                gp.copy_(sum(list(c.model.parameters())[i] * (s / total) for c, s in zip(clients, sizes)))
        drift = sum((p - q).norm() for p, q in zip(global_model.parameters(), params)).item()  # CLEAN: host read on the server, outside compiled code
        print(f"round {r} drift {drift:.4f}")
