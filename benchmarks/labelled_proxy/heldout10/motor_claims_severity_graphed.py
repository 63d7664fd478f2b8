"""Claim-severity model for motor insurance pricing (log link, Tweedie-style loss).

A rating-factor encoder (vehicle group, region, occupation, ...) and a severity
head are graphed with torch.cuda.make_graphed_callables to cut launch overhead in
the nightly refit over ~40M policy-years in fixed-size batches. The refitted
head is then used to score the renewal book.
"""
import math

import torch
import torch.nn as nn

CARDS = [60, 22, 120, 9, 35]   # cardinalities of the categorical rating factors
N_NUM, B = 14, 8192


class FactorEncoder(nn.Module):
    def __init__(self, d=16, drop_factor=0.1):
        super().__init__()
        self.embs = nn.ModuleList(nn.Embedding(c, d) for c in CARDS)
        self.num = nn.Linear(N_NUM, 64)
        self.mix = nn.Sequential(nn.Linear(64 + d * len(CARDS), 128), nn.SiLU())
        self.drop_factor = drop_factor
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(1234)

    def forward(self, cats, nums):
        e = torch.stack([emb(cats[:, i]) for i, emb in enumerate(self.embs)], 1)
        # drop whole rating factors so the model does not lean on a single one
        keep = torch.rand(cats.shape[0], len(CARDS), 1, device=cats.device, generator=self.gen) > self.drop_factor  # HAZARD: rng
        return self.mix(torch.cat([self.num(nums), (e * keep).flatten(1)], -1))


class SeverityHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = nn.Linear(128, 1)
        self.trend = 1.0  # claims-inflation factor on top of the fitted level

    def forward(self, h):
        return self.out(h).squeeze(-1) + math.log(self.trend)  # HAZARD: python-scalar


def tweedie_loss(log_mu, y, w, p=1.6):
    return (w * (-y * torch.exp((1 - p) * log_mu) / (1 - p) + torch.exp((2 - p) * log_mu) / (2 - p))).mean()


def audit_hook(module, inputs, output):
    module.last_mean = output.detach().mean()


def build(device="cuda"):
    enc, head = FactorEncoder().to(device), SeverityHead().to(device)
    enc.register_forward_hook(lambda m, i, o: o.clamp_(-20.0, 20.0))  # HAZARD: api-misuse
    cats = torch.zeros(B, len(CARDS), dtype=torch.long, device=device)
    nums = torch.randn(B, N_NUM, device=device)
    h = torch.randn(B, 128, device=device, requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        g_enc, g_head = torch.cuda.make_graphed_callables((enc, head), ((cats, nums), (h,)))
    head.register_forward_hook(audit_hook)  # CLEAN: hook registered after graphing
    return g_enc, g_head


def refit(loader, epochs=3, lr=2e-3):
    g_enc, g_head = build()
    opt = torch.optim.AdamW(list(g_enc.parameters()) + list(g_head.parameters()), lr=lr)
    for epoch in range(epochs):
        for cats, nums, claims, exposure in loader:
            with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: autocast around replays with the cache off
                log_mu = g_head(g_enc(cats, nums))  # CLEAN: positional tensors in the sample_args layout
            loss = tweedie_loss(log_mu.float() + torch.log(exposure), claims, exposure)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return g_enc, g_head


@torch.no_grad()
def score_renewals(g_enc, g_head, book):
    # book is cut into full B-row chunks so the graphed path is used
    return [torch.exp(g_head(g_enc(c, n))).cpu() for c, n in book]


if __name__ == "__main__":
    train = torch.load("motor_claims_2019_2024.pt")
    g_enc, g_head = refit(torch.utils.data.DataLoader(train, batch_size=B, drop_last=True))
    g_head.trend = 1.031  # Q3 claims-inflation update from the actuarial team
    renewals = score_renewals(g_enc, g_head, torch.load("renewals_q4.pt"))
