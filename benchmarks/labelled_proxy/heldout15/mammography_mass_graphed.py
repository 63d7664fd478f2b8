"""Two-view (CC + MLO) mammography mass classification: benign / malignant.

The shared view backbone and the fusion head are wrapped with
torch.cuda.make_graphed_callables for fine-tuning on 512x416 crops; validation
runs the same modules in eval mode.
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, H, W, DIM = 16, 512, 416, 256


def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride=2, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class ViewBackbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(conv_block(1, 32), conv_block(32, 64), conv_block(64, 128),
                                      conv_block(128, DIM), nn.AdaptiveAvgPool2d(1))

    def forward(self, x):                         # x: [B, 2, 1, H, W]
        if random.random() < 0.5:  # HAZARD: host-code
            x = torch.flip(x, dims=[-1])          # laterality flip
        b = x.shape[0]
        return self.features(x.flatten(0, 1)).view(b, 2, DIM)


class FusionHead(nn.Module):
    def __init__(self, view_weights=(0.45, 0.55)):
        super().__init__()
        self.view_weights = list(view_weights)    # radiologists read MLO slightly more
        self.cls = nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(), nn.Linear(128, 2))

    def forward(self, h):
        w = torch.tensor(self.view_weights, device=h.device)  # HAZARD: host-sync
        return self.cls((h * w.view(1, 2, 1)).sum(1))


def build(device="cuda"):
    backbone, head = ViewBackbone().to(device), FusionHead().to(device)
    feat_norms = []
    backbone.register_forward_hook(lambda m, i, o: feat_norms.append(o.detach().norm()))  # HAZARD: api-misuse
    x0 = torch.randn(BATCH, 2, 1, H, W, device=device)
    h0 = torch.randn(BATCH, 2, DIM, device=device, requires_grad=True)
    with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        backbone_g, head_g = torch.cuda.make_graphed_callables((backbone, head), ((x0,), (h0,)))
    calib = []
    head_g.register_forward_hook(lambda m, i, o: calib.append(o.detach()))  # CLEAN: hook registered after graphing
    return backbone_g, head_g, calib


def train(loader, val_loader, epochs=10):
    backbone_g, head_g, _ = build()
    params = list(backbone_g.parameters()) + list(head_g.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.05)
    for epoch in range(epochs):
        backbone_g.train()
        head_g.train()
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):  # CLEAN: cast cache disabled for the replays
                logits = head_g(backbone_g(x))  # CLEAN: graphed callables called with positional tensors
                loss = F.cross_entropy(logits.float(), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
        backbone_g.eval()
        head_g.eval()
        correct = 0
        with torch.no_grad():
            for x, y in val_loader:
                logits = head_g(backbone_g(x.cuda()))  # CLEAN: eval mode differs from capture, so the eager forward runs
                correct += (logits.argmax(1).cpu() == y).sum().item()
        print(f"epoch {epoch}: val acc {correct / len(val_loader.dataset):.3f}")
