"""Diabetic-retinopathy grading from fundus photographs (ICDR grades 0-4).

Backbone and ordinal (CORAL) head are graphed separately with
torch.cuda.make_graphed_callables for training; AdamW stays eager.
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

N_GRADES = 5
IMG = 512


class FundusBackbone(nn.Module):
    def __init__(self, widths=(32, 64, 128, 256, 384), p_green=0.2):
        super().__init__()
        layers, c = [], 3
        for w in widths:
            layers += [nn.Conv2d(c, w, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(w), nn.SiLU(),
                       nn.Conv2d(w, w, 3, padding=1, groups=w, bias=False), nn.BatchNorm2d(w), nn.SiLU()]
            c = w
        self.features = nn.Sequential(*layers)
        self.p_green = p_green
        self.out_dim = c

    def forward(self, x):
        if self.training and random.random() < self.p_green:  # HAZARD: host-code
            x = x[:, 1:2].expand(-1, 3, -1, -1)                   # green-channel-only augmentation
        return F.adaptive_avg_pool2d(self.features(x), 1).flatten(1)


class CoralHead(nn.Module):
    def __init__(self, c, p=0.2):
        super().__init__()
        self.fc = nn.Linear(c, 1, bias=False)
        self.bias = nn.Parameter(torch.zeros(N_GRADES - 1))
        self.p = p
        self.drop_gen = torch.Generator(device="cuda")
        self.drop_gen.manual_seed(1234)

    def forward(self, f):
        keep = torch.rand(f.shape, device=f.device, generator=self.drop_gen) > self.p  # HAZARD: rng
        return self.fc(f * keep / (1 - self.p)) + self.bias


def coral_loss(logits, grade):
    levels = (torch.arange(N_GRADES - 1, device=grade.device) < grade[:, None]).float()
    return F.binary_cross_entropy_with_logits(logits, levels)


def build(batch=16, device="cuda"):
    backbone = FundusBackbone().to(device).train()
    head = CoralHead(backbone.out_dim).to(device).train()
    feat_norms = []
    backbone.register_forward_hook(lambda m, i, o: feat_norms.append(o.detach().norm(dim=1).mean()))  # HAZARD: api-misuse
    x = torch.randn(batch, 3, IMG, IMG, device=device)
    f = torch.randn(batch, backbone.out_dim, device=device, requires_grad=True)
    with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        g_backbone, g_head = torch.cuda.make_graphed_callables((backbone, head), ((x,), (f,)))
    return backbone, head, g_backbone, g_head, feat_norms


def train(loader, epochs=30, device="cuda"):
    backbone, head, g_backbone, g_head, _ = build(device=device)
    grad_log = []
    head.fc.register_full_backward_hook(lambda m, gi, go: grad_log.append(go[0].detach().norm()))  # CLEAN: hook registered after graphing
    params = list(backbone.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=3e-4, weight_decay=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    for epoch in range(epochs):
        for img, grade in loader:
            img = img.to(device, non_blocking=True)  # CLEAN: host-to-device copy outside the graphs
            grade = grade.to(device, non_blocking=True)
            with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):  # CLEAN: cache disabled around graphed calls
                logits = g_head(g_backbone(img))  # CLEAN: graphed callables called positionally
            loss = coral_loss(logits.float(), grade)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    return backbone, head


@torch.no_grad()
def predict_grade(backbone, head, img):
    backbone.eval()
    head.eval()
    logits = head.fc(backbone(img)) + head.bias                      # eval: no dropout, eager
    return (torch.sigmoid(logits) > 0.5).sum(1)
