"""Detectron2-style Mask R-CNN mask head served with CUDA graphs: RoI features of the kept detections are
padded to a few fixed counts (25 / 50 / 100 per image) and each count bucket replays its own capture."""
from types import SimpleNamespace as CN

import torch
import torch.nn as nn
import torch.nn.functional as F

def get_cfg():
    return CN(MODEL=CN(ROI_MASK_HEAD=CN(NAME="MaskRCNNConvUpsampleHead", NUM_CONV=4, CONV_DIM=256, MASK_THRESHOLD=0.5),
                       ROI_HEADS=CN(NUM_CLASSES=80)),
              TEST=CN(DETECTIONS_PER_IMAGE=100, MASK_BUCKETS=(25, 50, 100)))

ROI_MASK_HEAD_REGISTRY = {}

def register(cls):
    ROI_MASK_HEAD_REGISTRY[cls.__name__] = cls
    return cls

@register
class MaskRCNNConvUpsampleHead(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = cfg.MODEL.ROI_MASK_HEAD
        self.mask_fcn = nn.Sequential(*[nn.Sequential(nn.Conv2d(256 if i == 0 else c.CONV_DIM, c.CONV_DIM, 3, padding=1),
                                                      nn.ReLU()) for i in range(c.NUM_CONV)])
        self.deconv = nn.ConvTranspose2d(c.CONV_DIM, c.CONV_DIM, 2, 2)
        self.predictor = nn.Conv2d(c.CONV_DIM, cfg.MODEL.ROI_HEADS.NUM_CLASSES, 1)
        self.mask_threshold = c.MASK_THRESHOLD

    def forward(self, roi_feats, pred_classes):
        logits = self.predictor(F.relu(self.deconv(self.mask_fcn(roi_feats))))
        k = logits.shape[0]
        idx = torch.arange(k)
        probs = logits[idx, pred_classes][:, None].sigmoid()  # HAZARD: host-sync
        thr = self.mask_threshold  # HAZARD: python-scalar
        return probs, probs > thr

class MaskHeadRunner:
    def __init__(self, cfg, head):
        self.head = head.cuda().eval()
        self.buckets = cfg.TEST.MASK_BUCKETS
        self.graph = torch.cuda.CUDAGraph()
        self.stream = torch.cuda.Stream()
        self.static = {}

    @torch.no_grad()
    def capture_all(self):
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            for k in self.buckets:
                feats = torch.zeros(k, 256, 14, 14, device="cuda")
                classes = torch.zeros(k, dtype=torch.long, device="cuda")
                self.stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(self.stream):
                    for _ in range(3):
                        self.head(feats, classes)
                torch.cuda.current_stream().wait_stream(self.stream)
                with torch.cuda.graph(self.graph, stream=self.stream):  # HAZARD: api-misuse
                    out = self.head(feats, classes)
                self.static[k] = (feats, classes, out)

    def set_quality(self, mode):
        self.head.mask_threshold = 0.5 if mode == "default" else 0.35

    @torch.no_grad()
    def __call__(self, roi_feats, pred_classes, boxes, image_hw):
        n = roi_feats.shape[0]
        k = next(b for b in self.buckets if b >= n)
        feats, classes, (probs, masks) = self.static[k]
        feats[:n].copy_(roi_feats)  # CLEAN: copy_ into the captured inputs
        classes[:n].copy_(pred_classes)
        self.graph.replay()
        return paste_masks(probs[:n].float().cpu(), boxes.cpu(), image_hw)  # CLEAN: eager paste after the replay

def paste_masks(probs, boxes, image_hw):
    H, W = image_hw
    out = torch.zeros(len(boxes), H, W)
    for i, (x0, y0, x1, y1) in enumerate(boxes.round().long().tolist()):  # CLEAN: CPU boxes, eager code
        w, h = max(x1 - x0, 1), max(y1 - y0, 1)
        out[i, y0:y0 + h, x0:x0 + w] = F.interpolate(probs[i:i + 1], size=(h, w), mode="bilinear")[0, 0][: H - y0, : W - x0]
    return out > 0.5

if __name__ == "__main__":
    cfg = get_cfg()
    runner = MaskHeadRunner(cfg, ROI_MASK_HEAD_REGISTRY[cfg.MODEL.ROI_MASK_HEAD.NAME](cfg))
    runner.capture_all()
    for i in range(20):
        n = 7 + 4 * i
        runner.set_quality("default" if i % 3 else "fine")
        boxes = torch.tensor([[10.0, 20.0, 110.0, 220.0]] * n)
        masks = runner(torch.randn(n, 256, 14, 14, device="cuda"), torch.randint(0, 80, (n,), device="cuda"), boxes, (480, 640))
