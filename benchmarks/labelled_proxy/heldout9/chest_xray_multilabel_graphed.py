"""Multi-label chest X-ray classifier (14 findings) trained with graphed backbone and head.

The backbone feature map is kept for Grad-CAM review of positive cases; the head pools the
features inside the lung mask produced by a separate, frozen lung segmenter.
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

N_FINDINGS = 14


class Backbone(nn.Module):
    def __init__(self, c=48, p_equalize=0.3):
        super().__init__()
        self.p_equalize = p_equalize
        self.stem = nn.Sequential(nn.Conv2d(1, c, 7, 2, 3), nn.BatchNorm2d(c), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.stages = nn.Sequential(*[
            nn.Sequential(nn.Conv2d(c * 2 ** i, c * 2 ** (i + 1), 3, 2, 1), nn.BatchNorm2d(c * 2 ** (i + 1)), nn.ReLU())
            for i in range(3)
        ])

    def forward(self, x):
        if self.training and random.random() < self.p_equalize:  # HAZARD: host-code
            x = (x - x.mean((2, 3), keepdim=True)) / (x.std((2, 3), keepdim=True) + 1e-5)
        return self.stages(self.stem(x))


class MaskedHead(nn.Module):
    def __init__(self, c=384):
        super().__init__()
        self.fc = nn.Linear(c, N_FINDINGS)

    def forward(self, feats, lung_mask):
        m = F.interpolate(lung_mask, size=feats.shape[-2:], mode="bilinear", align_corners=False)
        pooled = (feats * m).sum((2, 3)) / m.sum((2, 3)).clamp_min(1.0)
        return self.fc(pooled)


cam_store = {}


def keep_features(module, inp, out):
    cam_store["feats"] = out.detach()


def log_logits(module, inp, out):
    cam_store["logits"] = out.detach()


def build(batch=32, size=512):
    backbone, head = Backbone().cuda(), MaskedHead().cuda()
    backbone.register_forward_hook(keep_features)  # HAZARD: api-misuse
    x = torch.randn(batch, 1, size, size, device="cuda")
    f = torch.randn(batch, 384, size // 32, size // 32, device="cuda", requires_grad=True)
    m = torch.rand(batch, 1, size, size, device="cuda")
    with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        g_backbone, g_head = torch.cuda.make_graphed_callables((backbone, head), ((x,), (f, m)))
    head.register_forward_hook(log_logits)  # CLEAN: hook registered after graphing
    return backbone, head, g_backbone, g_head


def train(loader, epochs=10):
    backbone, head, g_backbone, g_head = build()
    params = list(backbone.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=1e-2)
    pos_weight = torch.full((N_FINDINGS,), 3.0, device="cuda")
    for ep in range(epochs):
        backbone.train(), head.train()
        for img, lung, y in loader:
            with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):  # CLEAN: autocast cache disabled around replays
                feats = g_backbone(img)
                logits = g_head(feats, lung_mask=lung)  # HAZARD: api-misuse
                loss = F.binary_cross_entropy_with_logits(logits.float(), y, pos_weight=pos_weight)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        backbone.eval(), head.eval()
        with torch.no_grad():
            img, lung, y = next(iter(loader))
            val_logits = g_head(g_backbone(img), lung)  # CLEAN: eval mode runs the eager forward, positional args
            auc_proxy = (val_logits.sigmoid() * y).sum() / y.sum().clamp_min(1)
            print(f"epoch {ep} mean positive score {auc_proxy.item():.3f}")


if __name__ == "__main__":
    fake = [(torch.randn(32, 1, 512, 512, device="cuda"), torch.rand(32, 1, 512, 512, device="cuda"),
             (torch.rand(32, N_FINDINGS, device="cuda") > 0.8).float()) for _ in range(8)]
    train(fake, epochs=2)
