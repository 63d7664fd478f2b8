"""CheXNet-style multi-label chest X-ray classifier (DenseNet-121, 14 findings, NIH ChestX-ray14).

Training script; the assistant added `torch.cuda.make_graphed_callables` on the backbone and the
head ("partial CUDA graphs, the optimizer stays eager") under mixed precision.
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

FINDINGS = 14


class DenseNetFeatures(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torchvision.models.densenet121(weights="IMAGENET1K_V1").features

    def forward(self, x):
        return F.relu(self.features(x))


class MultiLabelHead(nn.Module):
    def __init__(self, in_ch=1024, prior_logits=None):
        super().__init__()
        self.fc = nn.Linear(in_ch, FINDINGS)
        self.prior_logits = prior_logits or [0.0] * FINDINGS  # log-odds of label prevalence

    def forward(self, f):
        if self.training and random.random() < 0.5:  # HAZARD: host-code
            f = f.flip(-1)
        logits = self.fc(F.adaptive_avg_pool2d(f, 1).flatten(1))
        return logits + torch.tensor(self.prior_logits, device=f.device)  # HAZARD: host-sync


def build(batch, prior):
    backbone = DenseNetFeatures().cuda().train()
    head = MultiLabelHead(prior_logits=prior).cuda().train()
    feats = {}
    backbone.register_forward_hook(lambda m, i, o: feats.__setitem__("last", o))  # HAZARD: api-misuse
    sx = torch.randn(batch, 3, 224, 224, device="cuda")
    sf = torch.randn(batch, 1024, 7, 7, device="cuda", requires_grad=True)
    # CUDA graph optimization: graph forward+backward of both parts
    with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        g_backbone, g_head = torch.cuda.make_graphed_callables((backbone, head), ((sx,), (sf,)))
    return backbone, head, g_backbone, g_head, feats


def train(loader, val_loader, prior, epochs=10, batch=32):
    backbone, head, g_backbone, g_head, feats = build(batch, prior)
    params = list(backbone.parameters()) + list(head.parameters())
    opt = torch.optim.Adam(params, lr=1e-4, betas=(0.9, 0.999))
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.1, patience=1)  # CLEAN: eager optimizer, LR read each step
    pos_weight = torch.full((FINDINGS,), 3.0, device="cuda")
    for epoch in range(epochs):
        backbone.train(), head.train()
        for x, y in loader:  # drop_last=True
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):  # CLEAN: autocast without its cache at replay
                logits = g_head(g_backbone(x))
            loss = F.binary_cross_entropy_with_logits(logits.float(), y, pos_weight=pos_weight)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        val_loss = evaluate(backbone, head, g_backbone, g_head, val_loader)
        plateau.step(val_loss)
        print(f"epoch {epoch} val loss {val_loss:.4f}")


@torch.no_grad()
def evaluate(backbone, head, g_backbone, g_head, val_loader):
    backbone.eval(), head.eval()
    total, n = 0.0, 0
    for x, y in val_loader:
        logits = g_head(g_backbone(x.cuda()))  # CLEAN: eval mode runs the original forwards eagerly
        total += F.binary_cross_entropy_with_logits(logits, y.cuda(), reduction="sum").item()  # CLEAN: host read outside any graph
        n += y.numel()
    return total / n


def grad_cam(backbone, head, img):
    backbone.eval(), head.eval()
    acts = {}
    h = backbone.features.register_forward_hook(lambda m, i, o: acts.__setitem__("a", o))  # CLEAN: hook added after graphing, eager path
    logits = head(backbone(img))
    h.remove()
    return acts["a"], logits
