"""Order-to-courier assignment scorer for a food-delivery marketplace.

Trained on historical dispatch decisions: for each order in a 64-order window the
model scores all 128 nearby couriers and is fit with a softmax over couriers
against the courier the (good) human dispatcher picked, with an extra lateness
term. Batches have a fixed shape, so the whole step is captured.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

N_ORD, N_COUR, D = 64, 128, 32


class PairScorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.o = nn.Sequential(nn.Linear(D, 128), nn.ReLU(), nn.Linear(128, 64))
        self.c = nn.Sequential(nn.Linear(D, 128), nn.ReLU(), nn.Linear(128, 64))
        self.eta = nn.Linear(2, 1)

    def forward(self, orders, couriers, dist):
        s = self.o(orders) @ self.c(couriers).t() / 8.0
        return s - F.softplus(self.eta(torch.stack([dist, dist.pow(2)], -1))).squeeze(-1)


class DispatchTrainer:
    def __init__(self, zone_ids, courier_dropout: float = 0.1):
        self.model = PairScorer().cuda()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.zone_ids = list(zone_ids)                       # zones served by this city shard
        self.eta_table = torch.zeros(512, device="cuda")     # mean prep time per zone, minutes
        self.courier_dropout = courier_dropout
        self.o = torch.zeros(N_ORD, D, device="cuda")
        self.c = torch.zeros(N_COUR, D, device="cuda")
        self.dist = torch.zeros(N_ORD, N_COUR, device="cuda")
        self.target = torch.zeros(N_ORD, dtype=torch.long, device="cuda")
        self.promised = torch.zeros(N_ORD, device="cuda")
        self.graph = None

    def _step(self):
        scores = self.model(self.o, self.c, self.dist)
        if np.random.rand() < self.courier_dropout:  # HAZARD: host-code
            keep = torch.rand(N_COUR, device="cuda") > 0.2  # CLEAN: default CUDA generator
            scores = scores.masked_fill(~keep, -1e4)
        loss = F.cross_entropy(scores, self.target)
        prep = self.eta_table[self.zone_ids]  # HAZARD: host-sync
        eta = self.dist.gather(1, self.target[:, None])[:, 0] * 3.0 + prep.mean()
        late_frac = (eta > self.promised).float().mean()
        if late_frac > 0.3:  # HAZARD: dynamic-control-flow
            loss = loss + 0.1 * F.relu(eta - self.promised).mean()
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.opt.step()  # HAZARD: optimizer
        return loss.detach()

    def _capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_loss = self._step()

    def fit(self, batches, epochs: int = 5):
        history = []
        for epoch in range(epochs):
            for orders, couriers, dist, target, promised in batches:
                self.o.copy_(orders)  # CLEAN: copy_ into the static inputs
                self.c.copy_(couriers)
                self.dist.copy_(dist)
                self.target.copy_(target)
                self.promised.copy_(promised)
                if self.graph is None:
                    self._capture()
                self.graph.replay()
            history.append(self.static_loss.item())  # CLEAN: read once per epoch, after replay
        return history

    def refresh_prep_times(self, table: torch.Tensor):
        self.eta_table.copy_(table)


if __name__ == "__main__":
    trainer = DispatchTrainer(zone_ids=[3, 4, 5, 17, 18])
    data = [(torch.randn(N_ORD, D), torch.randn(N_COUR, D), torch.rand(N_ORD, N_COUR) * 5,
             torch.randint(0, N_COUR, (N_ORD,)), torch.full((N_ORD,), 30.0)) for _ in range(20)]
    data = [tuple(t.cuda() for t in b) for b in data]
    print(trainer.fit(data))
