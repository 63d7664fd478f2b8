"""Pedestrian attribute recognition on PA-100K (26 binary attributes) with a weighted BCE; the backbone and
the attribute head come from a small model zoo and are graphed with torch.cuda.make_graphed_callables."""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

POS_RATIO = [0.46, 0.12, 0.03, 0.58, 0.09, 0.19, 0.31, 0.07, 0.42, 0.05, 0.22, 0.16, 0.36,
             0.04, 0.27, 0.61, 0.11, 0.08, 0.33, 0.14, 0.02, 0.25, 0.06, 0.18, 0.39, 0.10]

class Backbone(nn.Module):
    def __init__(self, width=64, out_dim=512):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, width, 7, 2, 3), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
            nn.Conv2d(width, 2 * width, 3, 2, 1), nn.BatchNorm2d(2 * width), nn.ReLU(),
            nn.Conv2d(2 * width, out_dim, 3, 2, 1), nn.BatchNorm2d(out_dim), nn.ReLU())

    def forward(self, img):
        if self.training and random.random() < 0.5:  # HAZARD: host-code
            img = img.flip(-1)
        return self.features(img).mean((2, 3))

class AttributeHead(nn.Module):
    def __init__(self, in_dim, pos_ratio, tau=1.0):
        super().__init__()
        self.fc = nn.Linear(in_dim, len(pos_ratio))
        self.bn = nn.BatchNorm1d(len(pos_ratio))
        self.pos_ratio = torch.tensor(pos_ratio)
        self.tau = tau

    def forward(self, feat):
        logits = self.bn(self.fc(feat))
        prior = self.pos_ratio.to(feat.device)  # HAZARD: pinned-memory
        logits = logits + self.tau * torch.log(prior / (1 - prior))
        if not torch.isfinite(logits).all():  # HAZARD: dynamic-control-flow
            logits = torch.nan_to_num(logits, nan=0.0, posinf=20.0, neginf=-20.0)
        return logits

ZOO = {
    "strongbaseline-lite": lambda: (Backbone(64, 512), AttributeHead(512, POS_RATIO)),
    "strongbaseline-wide": lambda: (Backbone(96, 768), AttributeHead(768, POS_RATIO)),
}

def weighted_bce(logits, labels, pos_ratio):
    w = torch.where(labels > 0.5, torch.exp(1.0 - pos_ratio), torch.exp(pos_ratio))
    return F.binary_cross_entropy_with_logits(logits, labels, weight=w)

def mean_accuracy(logits, labels):
    pred = (logits > 0).float()
    pos = (pred * labels).sum(0) / labels.sum(0).clamp_min(1)
    neg = ((1 - pred) * (1 - labels)).sum(0) / (1 - labels).sum(0).clamp_min(1)
    return ((pos + neg) / 2).mean().item()

def main(train_loader, val_loader, name="strongbaseline-lite", epochs=30, batch=64):
    backbone, head = ZOO[name]()
    backbone, head = backbone.cuda().train(), head.cuda().train()
    img = torch.randn(batch, 3, 256, 128, device="cuda")
    feat = torch.randn(batch, head.fc.in_features, device="cuda", requires_grad=True)
    with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        backbone, head = torch.cuda.make_graphed_callables((backbone, head), ((img,), (feat,)))
    pos_ratio = torch.tensor(POS_RATIO, device="cuda")  # CLEAN: built once, outside any graph
    opt = torch.optim.SGD(list(backbone.parameters()) + list(head.parameters()), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    for epoch in range(epochs):
        for imgs, labels in train_loader:
            with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):  # CLEAN: autocast without its cache
                logits = head(backbone(imgs))
            scaler.scale(weighted_bce(logits.float(), labels, pos_ratio)).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=False)
        backbone.eval()
        head.eval()
        with torch.no_grad():
            scores = [mean_accuracy(head(backbone(x)), y) for x, y in val_loader]  # CLEAN: eval mode runs the eager forwards
        print(f"epoch {epoch}: mA {sum(scores) / len(scores):.4f}")
        backbone.train()
        head.train()
