"""ADAS perception: traffic-light state classifier (red / amber / green / off / arrow),
fine-tuned in the fleet-learning pipeline on hard cases mined from shadow mode.

`GraphedModelMixin` is shared by the perception heads: it graphs the sub-modules named in
`graph_targets` with torch.cuda.make_graphed_callables and swaps them in place.
"""
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class GraphedModelMixin:
    graph_targets: tuple = ()

    def graph_modules(self, samples):
        mods = tuple(getattr(self, n) for n in self.graph_targets)
        with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):  # CLEAN: autocast without its cast cache
            graphed = torch.cuda.make_graphed_callables(mods, samples)
        for n, g in zip(self.graph_targets, graphed):
            setattr(self, n, g)


class CropBackbone(nn.Module):
    def __init__(self, gamma_lut: np.ndarray):
        super().__init__()
        self.lut_np = gamma_lut.astype(np.float32)  # 256-entry gamma curve of the front camera
        self.conv = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4))

    def forward(self, crops):
        lut = torch.as_tensor(self.lut_np).to(crops.device)  # HAZARD: pinned-memory
        idx = (crops.clamp(0, 1) * 255).long()
        crops = lut.index_select(0, idx.flatten()).view_as(crops)
        gain = random.uniform(0.8, 1.2)  # HAZARD: host-code
        return self.conv(crops * gain).flatten(1)


class StateHead(nn.Module):
    def __init__(self, n_states=5):
        super().__init__()
        self.fc = nn.Linear(64 * 16, n_states)

    def forward(self, feats, roi_mask):
        logits = self.fc(feats)
        if torch.isnan(logits).any():  # HAZARD: dynamic-control-flow
            logits = torch.nan_to_num(logits)
        return logits.masked_fill(roi_mask.unsqueeze(1) == 0, -1e4)  # CLEAN: masked_fill keeps the shape static


class TrafficLightModel(GraphedModelMixin, nn.Module):
    graph_targets = ("backbone", "head")

    def __init__(self, gamma_lut):
        super().__init__()
        self.backbone = CropBackbone(gamma_lut)
        self.head = StateHead()

    def forward(self, crops, roi_mask):
        return self.head(self.backbone(crops), roi_mask=roi_mask)  # HAZARD: api-misuse


def finetune(model: TrafficLightModel, loader, steps=2000, batch=256):
    model.cuda().train()
    crops = torch.rand(batch, 3, 32, 32, device="cuda")
    feats = torch.randn(batch, 64 * 16, device="cuda", requires_grad=True)
    mask = torch.ones(batch, device="cuda")
    model.graph_modules(((crops,), (feats, mask)))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    for _, (x, y, m) in zip(range(steps), loader):
        with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):
            logits = model(x, m)
        loss = F.cross_entropy(logits.float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model


@torch.no_grad()
def evaluate(model: TrafficLightModel, loader):
    model.eval()
    correct = total = 0
    for x, y, m in loader:
        pred = model.head.fc(model.backbone(x)).argmax(-1)
        correct += (pred == y).sum().item()  # CLEAN: eager evaluation, graphs fall back to the original forwards in eval mode
        total += y.numel()
    model.train()
    return correct / max(total, 1)
