"""Personalised offer slots in a free-to-play game's in-game store.

A user tower (progress, session stats, 30-day spend) and an offer scorer
(offer embedding minus a price-sensitivity term) are trained on store
impressions -> purchases. Both are graphed with torch make_graphed_callables.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

N_FEAT, N_OFFER, D = 48, 300, 64
stats = {}


class UserTower(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(N_FEAT, 128), nn.ReLU(), nn.Linear(128, D))
        self.payer = nn.Linear(N_FEAT, D)

    def forward(self, feats, spend):
        u = self.mlp(feats)
        if spend.sum() == 0:  # HAZARD: dynamic-control-flow
            return u
        return u + self.payer(feats) * torch.log1p(spend)[:, None]


class OfferScorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.offer = nn.Embedding(N_OFFER, D)
        self.bias = nn.Parameter(torch.zeros(N_OFFER))
        self.price_sensitivity = 1.0            # economy team retunes this every live season

    def forward(self, u, log_price):
        logits = u @ self.offer.weight.t() + self.bias
        beta = self.price_sensitivity  # HAZARD: python-scalar
        return logits - beta * log_price[None, :]


def log_embed_norm(module, inputs, output):
    stats["u_norm"] = output.detach().norm(dim=-1).mean()


def track_offer_entropy(module, inputs, output):
    stats["entropy"] = torch.distributions.Categorical(logits=output.detach().float()).entropy().mean()


def build(batch: int = 512):
    user, scorer = UserTower().cuda(), OfferScorer().cuda()
    user.register_forward_hook(log_embed_norm)  # HAZARD: api-misuse
    feats = torch.randn(batch, N_FEAT, device="cuda")
    spend = torch.rand(batch, device="cuda")
    u0 = torch.randn(batch, D, device="cuda", requires_grad=True)
    log_price = torch.randn(N_OFFER, device="cuda")
    with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        g_user, g_scorer = torch.cuda.make_graphed_callables(
            (user, scorer), ((feats, spend), (u0, log_price)))
    scorer.register_forward_hook(track_offer_entropy)  # CLEAN: hook registered after graphing
    return user, scorer, g_user, g_scorer


def train(loader, epochs: int = 3):
    user, scorer, g_user, g_scorer = build()
    params = list(user.parameters()) + list(scorer.parameters())
    opt = torch.optim.AdamW(params, lr=2e-3, weight_decay=1e-5)
    for epoch in range(epochs):
        scorer.price_sensitivity = 1.0 + 0.25 * epoch
        for feats, spend, log_price, bought in loader:
            with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):  # CLEAN: autocast without its cache at replay
                logits = g_scorer(g_user(feats, spend), log_price)
            loss = F.cross_entropy(logits.float(), bought)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        for g in opt.param_groups:
            g["lr"] *= 0.5  # CLEAN: the optimizer steps eagerly, outside the graphed callables
        print(f"epoch {epoch} loss {loss.item():.4f} u_norm {float(stats['u_norm']):.3f}")  # CLEAN: eager logging between epochs
    return user, scorer


if __name__ == "__main__":
    data = [(torch.randn(512, N_FEAT, device="cuda"), torch.rand(512, device="cuda"),
             torch.randn(N_OFFER, device="cuda"), torch.randint(0, N_OFFER, (512,), device="cuda"))
            for _ in range(10)]
    train(data)
