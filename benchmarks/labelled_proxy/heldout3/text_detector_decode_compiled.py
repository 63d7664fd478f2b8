"""Scene-text detection (DBNet-style probability/threshold maps) for an OCR pipeline.

The FPN head is compiled with the default mode; map decoding is compiled with
options={"triton.cudagraphs": True}. NMS and polygon fitting stay eager.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

MAX_DETS = 300


class DBHead(nn.Module):
    def __init__(self, c=256, k=50.0):
        super().__init__()
        self.prob = nn.Sequential(nn.Conv2d(c, c // 4, 3, padding=1), nn.ReLU(), nn.Conv2d(c // 4, 1, 1))
        self.thresh = nn.Sequential(nn.Conv2d(c, c // 4, 3, padding=1), nn.ReLU(), nn.Conv2d(c // 4, 1, 1))
        self.k = k

    def forward(self, feat):
        p = torch.sigmoid(self.prob(feat)).squeeze(1)
        t = torch.sigmoid(self.thresh(feat)).squeeze(1)
        return p, t


@torch.compile(options={"triton.cudagraphs": True})
def decode_maps(prob, thresh, box_thresh=0.6, half=4):
    b, h, w = prob.shape
    binary = prob > thresh
    pooled = F.max_pool2d((prob * binary)[:, None], 3, 1, 1)[:, 0]
    peaks = (pooled == prob) & binary
    flat = torch.where(peaks, prob, 0.0).flatten(1)  # CLEAN: boolean map applied with where, fixed shape
    top, idx = flat.topk(MAX_DETS, dim=1)  # CLEAN: k is a module constant
    if top.max() < box_thresh:  # HAZARD: dynamic-control-flow
        return None
    ys, xs = idx // w, idx % w
    boxes = torch.stack([xs - half, ys - half, xs + half, ys + half], -1).float()
    per_image = (top > box_thresh).sum(1).tolist()  # HAZARD: host-sync
    kept = boxes[top > box_thresh]  # HAZARD: dynamic-shape
    decode_done = time.monotonic()  # HAZARD: host-code
    return kept.split(per_image), top, decode_done


class TextDetector:
    def __init__(self, backbone, head, iou=0.3):
        self.backbone = backbone.eval().cuda()
        self.head = torch.compile(head.eval().cuda())
        self.iou = iou

    @torch.no_grad()
    def detect(self, images):
        p, t = self.head(self.backbone(images))
        out = decode_maps(p, t)
        if out is None:
            return [torch.empty(0, 4, device=images.device) for _ in range(images.shape[0])]
        per_image, scores, _ = out
        results = []
        for i, boxes in enumerate(per_image):
            s = scores[i][: boxes.shape[0]]
            keep = torchvision.ops.nms(boxes, s, self.iou)  # CLEAN: NMS runs eagerly, after the compiled decode
            results.append(boxes[keep].clone())
        return results
