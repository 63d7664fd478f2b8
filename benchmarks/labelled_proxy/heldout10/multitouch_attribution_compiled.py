"""Multi-touch attribution with an attention-based conversion model.

Each user path is the last 32 ad touchpoints (channel, campaign, days before the
conversion window closes). The model predicts conversion; its attention weights,
corrected for recency decay, give each channel its credit. The model's forward
is compiled with mode="max-autotune"; so are the credit report and a
touch-free baseline used for incremental lift.
"""
import torch
import torch.nn as nn

PATH, CHANNELS, CAMPAIGNS = 32, 12, 5000


class AttributionNet(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.ch = nn.Embedding(CHANNELS, d)
        self.cp = nn.Embedding(CAMPAIGNS, d)
        self.rnn = nn.LSTM(d + 1, d, batch_first=True)
        self.att = nn.Linear(d, 1)
        self.out = nn.Linear(d, 1)
        self.half_life_days = 7.0

    def forward(self, channel, campaign, age_days):
        decay = torch.exp(-age_days * (0.693 / self.half_life_days))  # HAZARD: python-scalar
        h, _ = self.rnn(torch.cat([self.ch(channel) + self.cp(campaign), decay.unsqueeze(-1)], -1))
        a = torch.softmax(self.att(h).squeeze(-1) + torch.log(decay + 1e-6), -1)
        p = torch.sigmoid(self.out((a.unsqueeze(-1) * h).sum(1))).squeeze(-1)
        if torch.isnan(p).any():  # HAZARD: dynamic-control-flow
            p = torch.nan_to_num(p, nan=0.0)
        return p, a


class BaselineNet(nn.Module):
    """Campaign-level conversion rate without ad touches (holdout-calibrated)."""

    def __init__(self):
        super().__init__()
        self.rate = nn.Embedding(CAMPAIGNS, 1)

    def forward(self, campaign):
        return torch.sigmoid(self.rate(campaign[:, -1])).squeeze(-1)


def _credit(attn, channel, conv_p):
    credit = torch.zeros(attn.shape[0], CHANNELS, device=attn.device).scatter_add_(1, channel, attn)
    share = (credit * conv_p.unsqueeze(-1)).sum(0)
    share = share / share.sum()
    return share, torch.topk(share, 3).indices.tolist()  # HAZARD: host-sync


channel_credit = torch.compile(_credit, mode="max-autotune")
channel_credit_audit = torch.compile(_credit, mode="max-autotune-no-cudagraphs")


def campaign_report(model, baseline, loader, campaigns):
    model.eval()
    report = {}
    with torch.no_grad():
        for cfg, (channel, campaign, age) in zip(campaigns, loader):
            model.half_life_days = cfg["half_life"]
            p, attn = model(channel, campaign, age)
            p_keep = p.clone()  # CLEAN: graph output cloned before the next compiled call
            share, top = channel_credit(attn.clone(), channel, p_keep)
            share = share.cpu()
            base = baseline(campaign)
            lift = (p - base).mean().item()  # HAZARD: static-address
            report[cfg["name"]] = {"share": share, "top": top, "lift": lift, "conv": p_keep.mean().item()}  # CLEAN: host read of a cloned output in eager code
    return report


def quarterly_audit(attn_all, channel_all, p_all):
    """Full-quarter credit table from stored attention (one call, any size)."""
    with torch.no_grad():
        share, top = channel_credit_audit(attn_all, channel_all, p_all)  # CLEAN: no-cudagraphs compile of the same report
    return share.cpu(), top


if __name__ == "__main__":
    model = AttributionNet().cuda()
    model.load_state_dict(torch.load("mta_attention.pt"))
    model.forward = torch.compile(model.forward, mode="max-autotune")
    baseline = torch.compile(BaselineNet().cuda().eval(), mode="max-autotune")
    campaigns = [{"name": "spring_sale", "half_life": 3.0}, {"name": "brand_q2", "half_life": 14.0}]
    paths = torch.load("conversion_paths.pt")
    print(campaign_report(model, baseline, paths, campaigns))
