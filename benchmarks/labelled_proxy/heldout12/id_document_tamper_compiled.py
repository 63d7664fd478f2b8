"""ID-document tamper detection for remote KYC onboarding.

The photo of an ID card (rectified to 320x512) and its error-level-analysis
(ELA) map go through a small U-shaped net that outputs a pixel tamper mask
and a document-level forgery score. Training and serving functions live in a
registry and are compiled with CUDA graphs on registration.
"""
import dataclasses

import torch
import torch.nn as nn
import torch.nn.functional as F

CG = {"triton.cudagraphs": True}
STAGES = {}


def register(name, **kw):
    def deco(fn):
        STAGES[name] = torch.compile(fn, options=CG, **kw)
        return fn
    return deco


class TamperNet(nn.Module):
    def __init__(self, ch=32):
        super().__init__()
        self.register_buffer("ela_mean", torch.zeros(1, 3, 1, 1))
        self.register_buffer("ela_std", torch.ones(1, 3, 1, 1))
        self.down = nn.Sequential(nn.Conv2d(6, ch, 3, 2, 1), nn.ReLU(), nn.Conv2d(ch, 2 * ch, 3, 2, 1), nn.ReLU())
        self.up = nn.Sequential(nn.ConvTranspose2d(2 * ch, ch, 4, 2, 1), nn.ReLU(), nn.ConvTranspose2d(ch, 1, 4, 2, 1))
        self.cls = nn.Linear(2 * ch, 1)

    def forward(self, rgb, ela):
        h = self.down(torch.cat([rgb, (ela - self.ela_mean) / self.ela_std], 1))
        return self.up(h), self.cls(h.mean(dim=(2, 3))).squeeze(-1)


@dataclasses.dataclass
class LossCfg:
    edge_weight: float = 0.5


model = TamperNet().cuda()
cfg = LossCfg()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
STAGES["opt_step"] = torch.compile(opt.step, options=CG)


@register("train_loss")
def train_loss(rgb, ela, mask, forged):
    mask_logits, doc_logit = model(rgb, ela)
    pix = F.binary_cross_entropy_with_logits(mask_logits, mask, reduction="none")
    edges = (mask - F.avg_pool2d(mask, 3, 1, 1)).abs()
    w = cfg.edge_weight  # HAZARD: python-scalar
    return pix.mean() + w * (pix * edges).mean() + F.binary_cross_entropy_with_logits(doc_logit, forged)


@register("verify")
def verify(rgb, ela):
    mask_logits, doc_logit = model(rgb, ela)
    if (mask_logits > 0).sum() == 0:  # HAZARD: dynamic-control-flow
        return torch.sigmoid(doc_logit), torch.zeros_like(mask_logits)
    return torch.sigmoid(doc_logit), torch.sigmoid(mask_logits)


def fit(loader, epochs=30):
    model.train()
    for epoch in range(epochs):
        if epoch == 10:
            for group in opt.param_groups:
                group["lr"] = 3e-4  # HAZARD: optimizer
        if epoch == 20:
            for group in opt.param_groups:
                group["weight_decay"] = 0.0  # HAZARD: optimizer
        cfg.edge_weight = min(2.0, 0.5 + 0.1 * epoch)
        running = torch.zeros((), device="cuda")
        for rgb, ela, mask, forged in loader:
            loss = STAGES["train_loss"](rgb, ela, mask, forged)
            running += loss.detach()  # CLEAN: read before backward and the compiled optimizer step
            loss.backward()
            STAGES["opt_step"]()
            opt.zero_grad(set_to_none=False)
        print(f"epoch {epoch}: {running.item() / len(loader):.4f}")


def recalibrate_ela(stats):
    # a new phone camera pipeline changes the JPEG re-compression residuals
    model.ela_mean = stats["mean"].cuda()  # HAZARD: static-address
    model.ela_std.copy_(stats["std"])  # CLEAN: in-place update keeps the buffer address


@torch.no_grad()
def onboard(rgb, ela):
    score, mask = STAGES["verify"](rgb, ela)
    return float(score[0]), mask[0, 0].mean().item()


if __name__ == "__main__":
    data = [(torch.rand(16, 3, 320, 512, device="cuda"), torch.rand(16, 3, 320, 512, device="cuda"),
             (torch.rand(16, 1, 320, 512, device="cuda") > 0.97).float(), (torch.rand(16, device="cuda") > 0.5).float())
            for _ in range(50)]
    fit(data)
    model.eval()
    for n in range(5000):
        score, area = onboard(torch.rand(1, 3, 320, 512, device="cuda"), torch.rand(1, 3, 320, 512, device="cuda"))
        if n == 2500:
            recalibrate_ela({"mean": torch.full((1, 3, 1, 1), 0.02), "std": torch.full((1, 3, 1, 1), 0.9)})
