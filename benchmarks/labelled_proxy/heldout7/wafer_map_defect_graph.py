"""Wafer-map defect pattern classifier for the wafer-sort line (WM-811K classes).

Each lot of 25 wafers arrives as a stack of die-level bin maps (one channel per
probe-test bin). The lot is classified in one CUDA graph replay and the pattern
histogram goes to the yield dashboard.
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

CLASSES = ("center", "donut", "edge_loc", "edge_ring", "loc", "near_full", "random", "scratch", "none")
N_CLS = len(CLASSES)
LOT, N_BINS, GRID = 25, 16, 64
KEEP_BINS = [0, 1, 2, 5, 7, 11]                # pass, fail-open, fail-short, leakage, vth, idsat


class WaferNet(nn.Module):
    def __init__(self, c_in=len(KEEP_BINS)):
        super().__init__()
        def stage(a, b):
            return nn.Sequential(nn.Conv2d(a, b, 3, padding=1), nn.BatchNorm2d(b), nn.ReLU(),
                                 nn.Conv2d(b, b, 3, padding=1), nn.BatchNorm2d(b), nn.ReLU(), nn.MaxPool2d(2))
        self.features = nn.Sequential(stage(c_in, 32), stage(32, 64), stage(64, 128), stage(128, 256))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.3), nn.Linear(256, N_CLS))

    def forward(self, x):
        return self.head(self.features(x))


class LotClassifier:
    def __init__(self, model, device="cuda"):
        self.model = model.eval().to(device)
        self.device = device
        self.keep_idx = torch.tensor(KEEP_BINS, device=device)  # CLEAN: index tensor built once, outside capture
        self.static_map = torch.zeros(LOT, N_BINS, GRID, GRID, device=device)
        self.graph = None

    def _classify(self, maps):
        x = maps[:, KEEP_BINS]  # HAZARD: host-sync
        if random.random() < 0.5:  # HAZARD: host-code
            x = x.flip(-1)
        logits = (self.model(x) + self.model(torch.rot90(x, 2, dims=(-2, -1)))) / 2  # CLEAN: fixed rotation TTA, no host decision
        pred = logits.argmax(-1)
        counts = torch.zeros(N_CLS, device=x.device).scatter_add_(0, pred, torch.ones_like(pred, dtype=torch.float))  # CLEAN: fixed-size histogram
        present = torch.unique(pred)  # HAZARD: dynamic-shape
        lot_flags = torch.zeros(N_CLS, device=x.device).index_fill_(0, present, 1.0)
        return logits.softmax(-1), counts, lot_flags

    @torch.no_grad()
    def capture(self):
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):  # HAZARD: api-misuse
            self.static_out = self._classify(self.static_map)

    @torch.no_grad()
    def classify_lot(self, lot_maps):
        self.static_map.copy_(lot_maps)  # CLEAN: copy_ into the captured input
        self.graph.replay()
        probs, counts, flags = (t.clone() for t in self.static_out)
        return probs, counts, flags

    @torch.no_grad()
    def embed_for_clustering(self, maps):
        # eager path used nightly to cluster unknown patterns
        x = maps.index_select(1, self.keep_idx)
        return F.normalize(self.model.features(x).mean((-2, -1)), dim=-1)


def publish(dashboard, lot_id, clf, lot_maps):
    probs, counts, flags = clf.classify_lot(lot_maps)
    dashboard.post(lot_id, {c: int(n) for c, n in zip(CLASSES, counts.tolist())})  # CLEAN: host reads after replay
    if flags[CLASSES.index("scratch")] > 0:
        dashboard.alert(lot_id, "scratch pattern in lot")
