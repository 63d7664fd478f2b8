"""Rotated RetinaNet head for DOTA-style aerial tiles: an mmrotate-like registry and config dict, and a
CUDA-graph runner with one graph per batch bucket, all sharing one memory pool."""
import math
import numpy as np
import torch
import torch.nn as nn

class Registry:
    def __init__(self, name):
        self.name, self._module_dict = name, {}
    def register_module(self, name=None):
        def _register(cls):
            self._module_dict[name or cls.__name__] = cls
            return cls
        return _register
    def build(self, cfg, **default_args):
        args = {**cfg, **default_args}
        return self._module_dict[args.pop("type")](**args)

ROTATED_HEADS, BBOX_CODERS = Registry("rotated_head"), Registry("bbox_coder")

@BBOX_CODERS.register_module()
class DeltaXYWHAOBBoxCoder:
    def __init__(self, target_stds=(0.1, 0.1, 0.2, 0.2, 0.1), angle_range="le90", wh_ratio_clip=16 / 1000):
        self.stds = np.asarray(target_stds, dtype=np.float32)
        self.angle_range, self.max_ratio = angle_range, abs(math.log(wh_ratio_clip))
    def decode(self, anchors, deltas):
        stds = torch.from_numpy(self.stds).to(deltas.device)  # HAZARD: pinned-memory
        dx, dy, dw, dh, da = (deltas * stds).unbind(-1)
        ax, ay, aw, ah, aa = anchors.unbind(-1)
        dw, dh = dw.clamp(-self.max_ratio, self.max_ratio), dh.clamp(-self.max_ratio, self.max_ratio)
        cx = ax + dx * aw * torch.cos(aa) - dy * ah * torch.sin(aa)
        cy = ay + dx * aw * torch.sin(aa) + dy * ah * torch.cos(aa)
        ang = aa + da * math.pi
        if self.angle_range == "le90":
            ang = torch.remainder(ang + math.pi / 2, math.pi) - math.pi / 2
        return torch.stack([cx, cy, aw * dw.exp(), ah * dh.exp(), ang], -1)

@ROTATED_HEADS.register_module()
class RotatedRetinaHead(nn.Module):
    def __init__(self, num_classes=15, in_channels=256, score_thr=0.05, classes_of_interest=None,
                 bbox_coder=dict(type="DeltaXYWHAOBBoxCoder")):
        super().__init__()
        self.num_classes = num_classes
        self.cls_conv = nn.Conv2d(in_channels, num_classes, 3, padding=1)
        self.reg_conv = nn.Conv2d(in_channels, 5, 3, padding=1)
        self.score_thr, self.classes_of_interest = score_thr, list(classes_of_interest or range(num_classes))
        self.bbox_coder = BBOX_CODERS.build(bbox_coder)

    def forward(self, feat, anchors):
        b = feat.shape[0]  # batch bucket
        cls = self.cls_conv(feat).permute(0, 2, 3, 1).reshape(b, -1, self.num_classes).sigmoid()
        cls = cls[:, :, self.classes_of_interest]  # HAZARD: host-sync
        reg = self.reg_conv(feat).permute(0, 2, 3, 1).reshape(b, -1, 5)
        boxes = self.bbox_coder.decode(anchors.expand(b, -1, -1), reg)
        thr = self.score_thr  # HAZARD: python-scalar
        scores = torch.where(cls > thr, cls, torch.zeros_like(cls))  # CLEAN: torch.where keeps a fixed shape
        return boxes, scores

def grid_anchors(h, w, stride=8, size=32.0, device="cuda"):
    ys, xs = torch.meshgrid(torch.arange(h, device=device), torch.arange(w, device=device), indexing="ij")
    cx, cy = (xs.flatten() + 0.5) * stride, (ys.flatten() + 0.5) * stride
    return torch.stack([cx, cy, torch.full_like(cx, size), torch.full_like(cx, size), torch.zeros_like(cx)], -1)[None]

class RotatedDetRunner:
    def __init__(self, cfg, device="cuda"):
        self.head = ROTATED_HEADS.build(cfg["bbox_head"]).to(device).eval()
        self.buckets, self.feat_hw = sorted(cfg.get("batch_buckets", (1, 2, 4, 8))), cfg["feat_hw"]
        self.side, self.pool = torch.cuda.Stream(), torch.cuda.graph_pool_handle()
        self.graphs, self.io, self.anchors = {}, {}, None

    @torch.no_grad()
    def capture(self, anchors):
        self.anchors = anchors
        for bs in reversed(self.buckets):
            x = torch.zeros(bs, 256, *self.feat_hw, device="cuda")
            self.side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.side):
                for _ in range(3):
                    self.head(x, self.anchors)
            torch.cuda.current_stream().wait_stream(self.side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool, stream=self.side):  # CLEAN: forked side stream, warmed up
                out = self.head(x, self.anchors)
            self.graphs[bs], self.io[bs] = g, (x, out)

    def set_anchors(self, anchors):
        self.anchors = anchors  # HAZARD: static-address

    @torch.no_grad()
    def __call__(self, feats, min_score=0.3):
        n = feats.shape[0]
        bs = next(b for b in self.buckets if b >= n)  # pad up to the next captured bucket
        x, (boxes, scores) = self.io[bs]
        x[:n].copy_(feats)  # CLEAN: copy_ into the captured input
        self.graphs[bs].replay()
        best, labels = scores[:n].max(-1)
        keep = best > min_score
        return [(boxes[i][keep[i]].cpu(), labels[i][keep[i]].cpu()) for i in range(n)]  # CLEAN: eager, after replay

if __name__ == "__main__":
    cfg = dict(bbox_head=dict(type="RotatedRetinaHead", score_thr=0.05, classes_of_interest=[0, 1, 4, 5, 9]),
               feat_hw=(128, 128), batch_buckets=(1, 2, 4, 8))
    runner = RotatedDetRunner(cfg)
    runner.capture(grid_anchors(128, 128))
    for scene in ("harbour", "airport", "harbour"):
        runner.head.score_thr = 0.05 if scene == "harbour" else 0.2  # per-scene threshold from the service config
        dets = runner(torch.randn(3, 256, 128, 128, device="cuda"))
    runner.set_anchors(grid_anchors(128, 128, size=48.0))
    dets = runner(torch.randn(5, 256, 128, 128, device="cuda"))
