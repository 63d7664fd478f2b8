"""Object-detection style predictor that compiles its backbone+head with max-autotune."""
import torch
import torch.nn as nn


class DetectHead(nn.Module):
    def __init__(self, c_in=256, n_cls=80, score_thresh=0.3):
        super().__init__()
        self.cls = nn.Conv2d(c_in, n_cls, 1)
        self.box = nn.Conv2d(c_in, 4, 1)
        self.score_thresh = score_thresh

    def forward(self, feat):
        scores = self.cls(feat).sigmoid().flatten(2)
        boxes = self.box(feat).flatten(2)
        best, labels = scores.max(1)
        keep = best > self.score_thresh
        idx = keep.nonzero(as_tuple=True)  # HAZARD: dynamic-shape
        kept_labels = torch.unique(labels[keep])  # HAZARD: dynamic-shape
        n_kept = keep.sum(-1).tolist()  # HAZARD: host-sync
        return boxes, best, labels, idx, kept_labels, n_kept


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 64, 3, 2, 1), nn.ReLU(),
            nn.Conv2d(64, 256, 3, 2, 1), nn.ReLU(),
        )
        self.head = DetectHead()

    def forward(self, images):
        return self.head(self.backbone(images))


class Predictor:
    def __init__(self, weights=None, compile_mode="max-autotune"):
        self.model = Detector().cuda().eval()
        if weights is not None:
            self.model.load_state_dict(torch.load(weights, map_location="cuda"))
        self.model = torch.compile(self.model, mode=compile_mode)

    @torch.inference_mode()
    def __call__(self, images):
        boxes, scores, labels, _, _, counts = self.model(images.cuda())
        out = []
        for b, n in enumerate(counts):
            keep = scores[b] > 0.3
            out.append((boxes[b][:, keep].cpu(), labels[b][keep].cpu()))  # CLEAN: eager post-processing after the call
        return out
