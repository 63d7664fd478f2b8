"""Delayed-feedback conversion model (Chapelle 2014) for performance campaigns.

Clicks are labelled as converted / not-yet-converted with the time elapsed
since the click. The model predicts p(convert) and an exponential delay rate;
the loss treats pending clicks as censored. Tower and both heads are graphed
together with torch.cuda.make_graphed_callables.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

N_FEAT, HID, BATCH = 96, 128, 8192


class FeatureTower(nn.Module):
    def __init__(self, campaign_boost):
        super().__init__()
        self.campaign_boost = campaign_boost
        self.mlp = nn.Sequential(nn.Linear(N_FEAT, HID), nn.ReLU(), nn.Linear(HID, HID), nn.ReLU())

    def forward(self, x):
        boost = torch.tensor(self.campaign_boost, device=x.device)  # HAZARD: host-sync
        return self.mlp(x) * (1.0 + boost.mean())


class ConvHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(HID, 1)

    def forward(self, h):
        return torch.sigmoid(self.fc(h)).squeeze(-1).clamp(1e-6, 1 - 1e-6)


class DelayHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(HID, 1)
        self.elapsed_scale = 1.0

    def forward(self, h, elapsed_days):
        rate = F.softplus(self.fc(h)).squeeze(-1) * self.elapsed_scale  # HAZARD: python-scalar
        if torch.isnan(rate).any():  # HAZARD: dynamic-control-flow
            rate = torch.ones_like(rate)
        return rate, torch.exp(-rate * elapsed_days)


def dfm_loss(p, rate, surv, converted, delay_days):
    pos = torch.log(p) + torch.log(rate) - rate * delay_days
    neg = torch.log1p(-p + p * surv)
    return -(torch.where(converted, pos, neg)).mean()


def build(tower, conv, delay):
    x = torch.randn(BATCH, N_FEAT, device="cuda")
    h = torch.randn(BATCH, HID, device="cuda", requires_grad=True)
    e = torch.rand(BATCH, device="cuda") * 30.0
    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: autocast cache disabled for graphing
        return torch.cuda.make_graphed_callables((tower, conv, delay), ((x,), (h,), (h, e)))


def train(loader, campaign_boost, epochs=10):
    tower, conv, delay = FeatureTower(campaign_boost).cuda(), ConvHead().cuda(), DelayHead().cuda()
    g_tower, g_conv, g_delay = build(tower, conv, delay)
    params = [*tower.parameters(), *conv.parameters(), *delay.parameters()]
    opt = torch.optim.Adam(params, lr=1e-3)
    for epoch in range(epochs):
        delay.elapsed_scale = 0.5 + 0.05 * epoch
        for x, converted, delay_days, elapsed in loader:
            h = g_tower(x)
            p = g_conv(h)  # CLEAN: positional tensor argument
            rate, surv = g_delay(h, elapsed_days=elapsed)  # HAZARD: api-misuse
            delay_obs = delay_days.masked_fill(~converted, 0.0)  # CLEAN: masked_fill keeps the shape
            loss = dfm_loss(p, rate, surv, converted, delay_obs)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")
    return tower, conv, delay


if __name__ == "__main__":
    batches = []
    for _ in range(100):
        conv_flag = torch.rand(BATCH, device="cuda") < 0.05
        batches.append((torch.randn(BATCH, N_FEAT, device="cuda"), conv_flag,
                        torch.rand(BATCH, device="cuda") * 7.0, torch.rand(BATCH, device="cuda") * 30.0))
    train(batches, campaign_boost=[0.0, 0.1, 0.25, 0.0, 0.05])
