"""Markdown (clearance) pricing: a demand-vs-discount model per SKU-store.

Demand is modelled as base(x) * (1 - discount) ** elasticity(x), with the
elasticity shrunk toward a per-category prior that the pricing team
re-estimates each quarter. The full training step (forward, Poisson loss,
backward, Adam) is captured once and replayed for every batch.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

N_FEATS, N_CAT, BATCH = 32, 40, 4096


class ElasticityNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.cat_emb = nn.Embedding(N_CAT, 16)
        self.mlp = nn.Sequential(nn.Linear(N_FEATS + 16 + 1, 128), nn.SiLU(), nn.Linear(128, 2))
        self.register_buffer("category_prior", torch.full((N_CAT,), -1.5))
        self.register_buffer("unit_cost", torch.zeros(N_CAT))

    def forward(self, feats, cat, discount):
        h = self.mlp(torch.cat([feats, self.cat_emb(cat), discount[:, None]], dim=-1))
        elasticity = self.category_prior[cat] + 0.5 * torch.tanh(h[:, 0])
        base = F.softplus(h[:, 1])
        return base * torch.exp(elasticity * torch.log1p(-discount.clamp(max=0.9)))


class MarkdownTrainer:
    def __init__(self, model, seed=3):
        self.model = model.cuda().train()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=3e-3, capturable=True)  # CLEAN: capturable Adam inside the graph
        self.shopper_gen = torch.Generator(device="cuda")
        self.shopper_gen.manual_seed(seed)
        self.feats = torch.zeros(BATCH, N_FEATS, device="cuda")
        self.cat = torch.zeros(BATCH, dtype=torch.long, device="cuda")
        self.discount = torch.zeros(BATCH, device="cuda")
        self.units = torch.zeros(BATCH, device="cuda")

    def _step(self):
        promo_week = np.random.rand() < 0.1  # HAZARD: host-code
        disc = self.discount * (1.5 if promo_week else 1.0)
        keep = torch.rand(BATCH, device="cuda", generator=self.shopper_gen) > 0.2  # HAZARD: rng
        pred = self.model(self.feats, self.cat, disc)
        nll = F.poisson_nll_loss(pred, self.units, log_input=False, reduction="none")
        margin_w = 1.0 + self.model.unit_cost[self.cat]
        loss = (nll * keep * margin_w).sum() / keep.sum().clamp(min=1)
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.opt.step()
        return loss.detach()

    def capture(self):
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    self._step()
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.static_loss = self._step()

    def train_epoch(self, batches):
        total = torch.zeros((), device="cuda")
        for feats, cat, disc, units in batches:
            self.feats.copy_(feats)  # CLEAN: copied into the captured inputs
            self.cat.copy_(cat)
            self.discount.copy_(disc)
            self.units.copy_(units)
            self.graph.replay()
            total += self.static_loss
        return total / len(batches)

    def quarterly_refresh(self, prior, cost):
        self.model.category_prior = torch.as_tensor(prior, dtype=torch.float32).cuda()  # HAZARD: static-address
        self.model.unit_cost.copy_(torch.as_tensor(cost, dtype=torch.float32))  # CLEAN: in-place refresh keeps the address


if __name__ == "__main__":
    tr = MarkdownTrainer(ElasticityNet())
    data = [(torch.randn(BATCH, N_FEATS, device="cuda"), torch.randint(0, N_CAT, (BATCH,), device="cuda"),
             torch.rand(BATCH, device="cuda") * 0.6, torch.poisson(torch.full((BATCH,), 3.0, device="cuda")))
            for _ in range(50)]
    tr.capture()
    for epoch in range(40):
        print(epoch, float(tr.train_epoch(data)))
        if epoch % 10 == 9:
            for group in tr.opt.param_groups:
                group["lr"] *= 0.5  # HAZARD: optimizer
        if epoch == 20:
            tr.quarterly_refresh(np.full(N_CAT, -1.8), np.random.rand(N_CAT))
