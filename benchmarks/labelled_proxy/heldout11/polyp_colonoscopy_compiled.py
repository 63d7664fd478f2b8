"""Real-time polyp detection (CADe) on a 50 fps colonoscopy feed.

A single-stage detector predicts a dense objectness / box map at 1/8 resolution; a light
temporal tracker smooths detections over frames. Both are compiled with a reduce-overhead
partial of torch.compile.
"""
import functools
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

rcompile = functools.partial(torch.compile, mode="reduce-overhead")
SIZE = 352


class PolypDetector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU(),
            nn.Conv2d(64, 128, 3, 2, 1), nn.ReLU())
        self.obj = nn.Conv2d(128, 1, 1)
        self.box = nn.Conv2d(128, 4, 1)

    def forward(self, frame):
        f = self.backbone(frame)
        return self.obj(f).sigmoid(), self.box(f).exp()


@rcompile
def detect(model, frame, light_gain):
    frame = frame * light_gain  # HAZARD: python-scalar
    t0 = time.perf_counter()  # HAZARD: host-code
    obj, box = model(frame)
    scores = obj.flatten(1)
    keep = torch.where(scores > 0.5, scores, torch.zeros_like(scores))  # CLEAN: torch.where keeps the shape static
    return keep, box.flatten(2), t0


@rcompile
def track(prev_heat, heat):
    return 0.6 * prev_heat + 0.4 * heat


@rcompile
def boxes_above(scores, boxes, thr):
    return boxes[:, :, scores[0] > thr]  # HAZARD: dynamic-shape


class CADeSession:
    def __init__(self, model, light_gain=1.0):
        self.model = model.cuda().eval()
        self.light_gain = light_gain                                 # white-balance gain of the current scope
        self.heat = torch.zeros(1, (SIZE // 8) ** 2, device="cuda")

    @torch.no_grad()
    def on_frame(self, raw):
        frame = F.interpolate(raw, size=(SIZE, SIZE), mode="bilinear")  # CLEAN: every frame resized to one fixed shape
        heat, boxes, _ = detect(self.model, frame, self.light_gain)
        boxes = boxes.clone()  # CLEAN: boxes copied out before the next compiled call
        self.heat = track(self.heat, heat)  # HAZARD: static-address
        return self.heat.clone(), boxes

    @torch.no_grad()
    def on_frame_safe(self, raw):
        prev = self.heat.clone()
        frame = F.interpolate(raw, size=(SIZE, SIZE), mode="bilinear")
        heat, boxes, _ = detect(self.model, frame, self.light_gain)
        heat, boxes = heat.clone(), boxes.clone()
        self.heat = track(prev, heat).clone()  # CLEAN: inputs and output cloned around the compiled call
        return self.heat, boxes_above(self.heat, boxes, 0.5)


if __name__ == "__main__":
    sess = CADeSession(PolypDetector())
    for i in range(500):
        if i % 100 == 0:
            sess.light_gain = 1.0 + 0.05 * (i // 100)                # scope swapped / re-white-balanced
        heat, boxes = sess.on_frame(torch.rand(1, 3, 1080, 1350, device="cuda"))
    heat, boxes = sess.on_frame_safe(torch.rand(1, 3, 1080, 1350, device="cuda"))
