"""Multi-task dense prediction (segmentation + depth + surface normals) on a shared backbone.

The task heads and the weighted multi-task loss are graphed with
torch.cuda.make_graphed_callables; the backbone stays eager (it is frozen early on).
Task weights are re-balanced every epoch with dynamic weight averaging (DWA).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiTaskHeads(nn.Module):
    def __init__(self, in_ch=256, n_classes=40, ignore_index=255):
        super().__init__()
        self.seg = nn.Conv2d(in_ch, n_classes, 1)
        self.depth = nn.Sequential(nn.Conv2d(in_ch, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 1, 1))
        self.normal = nn.Conv2d(in_ch, 3, 1)
        self.n_classes, self.ignore_index = n_classes, ignore_index
        self.w = {"seg": 1.0, "depth": 1.0, "normal": 1.0}
        self.step = 0

    def forward(self, feats, seg_t, depth_t, normal_t):
        self.step += 1  # HAZARD: host-code
        seg = self.seg(feats)
        present = torch.unique(seg_t)  # HAZARD: dynamic-shape
        cls_w = torch.zeros(self.n_classes + 1, device=feats.device).index_fill_(0, present.clamp_max(self.n_classes), 1.0)
        l_seg = F.cross_entropy(seg, seg_t, weight=cls_w[: self.n_classes] + 0.1, ignore_index=self.ignore_index)
        depth = self.depth(feats).squeeze(1)
        valid = depth_t > 0
        l_depth = (torch.where(valid, (depth - depth_t).abs(), 0.0)).sum() / valid.sum().clamp_min(1)  # CLEAN: masked mean via where, fixed shape
        n = F.normalize(self.normal(feats), dim=1)
        l_norm = (1 - (n * normal_t).sum(1)).mean()
        return self.w["seg"] * l_seg + self.w["depth"] * l_depth + self.w["normal"] * l_norm  # HAZARD: python-scalar


class DWA:
    def __init__(self, tasks, temp=2.0):
        self.tasks, self.temp, self.hist = tasks, temp, []

    def weights(self):
        if len(self.hist) < 2:
            return {t: 1.0 for t in self.tasks}
        r = {t: self.hist[-1][t] / max(self.hist[-2][t], 1e-8) for t in self.tasks}
        z = sum(math.exp(v / self.temp) for v in r.values())
        return {t: len(self.tasks) * math.exp(r[t] / self.temp) / z for t in self.tasks}


def build(backbone, heads, batch, h, w, in_ch=256):
    sample = (
        torch.randn(batch, in_ch, h // 4, w // 4, device="cuda", requires_grad=True),
        torch.randint(0, 40, (batch, h // 4, w // 4), device="cuda"),
        torch.rand(batch, h // 4, w // 4, device="cuda"),
        F.normalize(torch.randn(batch, 3, h // 4, w // 4, device="cuda"), dim=1),
    )
    with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):  # CLEAN: cache disabled as required
        graphed = torch.cuda.make_graphed_callables(heads, sample, num_warmup_iters=3)
    graphed.register_forward_hook(lambda m, a, o: None)  # CLEAN: hook added after graphing, allowed
    return graphed


def train_epoch(backbone, graphed, heads, loader, opt, dwa, epoch_losses):
    heads.w.update(dwa.weights())
    totals = {t: 0.0 for t in dwa.tasks}
    for img, seg_t, depth_t, normal_t in loader:
        with torch.no_grad():
            feats = backbone(img.cuda(non_blocking=True))
        feats.requires_grad_(True)
        with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):
            loss = graphed(feats, seg_t.cuda(), depth_t=depth_t.cuda(), normal_t=normal_t.cuda())  # HAZARD: api-misuse
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        totals["seg"] += loss.item()
    dwa.hist.append(totals)
    epoch_losses.append(totals)
