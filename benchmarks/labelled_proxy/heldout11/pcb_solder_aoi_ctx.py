"""Automated optical inspection (AOI) of solder joints after reflow.

Each board image is cut into 64 joint crops (from the pick-and-place centroid file); a CNN
classifies good / insufficient / bridge / tombstone / void. Inference goes through a small
capture helper so the line PC can replay one graph per board.
"""
import contextlib
import logging

import torch
import torch.nn as nn

log = logging.getLogger("aoi")
CLASSES = ("good", "insufficient", "bridge", "tombstone", "void")


@contextlib.contextmanager
def graph_capture(pool=None):
    g = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.graph(g, pool=pool, stream=stream):  # HAZARD: api-misuse
        yield g
    torch.cuda.current_stream().wait_stream(stream)


class JointNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                               nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                               nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                               nn.Flatten(), nn.Linear(128, len(CLASSES)))

    def forward(self, x):
        return self.f(x)


class BoardInspector:
    def __init__(self, net, n_joints=64, crop=48):
        self.net = net.cuda().eval()
        self.static_crops = torch.zeros(n_joints, 3, crop, crop, device="cuda")
        self.graph = None

    @torch.no_grad()
    def _inspect(self):
        logits = self.net(self.static_crops)
        cls = logits.argmax(1)
        bad = cls != 0
        log.info("inspecting board")  # CLEAN: plain-string log, no tensor is formatted
        worst = logits.softmax(1)[:, 0].topk(5, largest=False)  # CLEAN: fixed-k topk keeps shapes static
        defect_types = torch.unique(cls[bad])  # HAZARD: dynamic-shape
        log.warning(f"{bad.sum()} suspicious joints")  # HAZARD: host-sync
        torch.cuda.empty_cache()  # HAZARD: memory
        return cls, worst.indices, defect_types

    def inspect(self, crops):
        self.static_crops.copy_(crops)
        if self.graph is None:
            with graph_capture() as g:
                self.out = self._inspect()
            self.graph = g
        self.graph.replay()
        cls, worst, _ = self.out
        return [CLASSES[i] for i in cls.tolist()], worst.tolist()  # CLEAN: host reads after the replay


def run_line(inspector, boards):
    for serial, crops in boards:
        labels, worst = inspector.inspect(crops)
        n_bad = sum(lbl != "good" for lbl in labels)
        log.info("board %s: %d defects, worst joints %s", serial, n_bad, worst)  # CLEAN: formatting host values after the replay
        yield serial, labels


if __name__ == "__main__":
    insp = BoardInspector(JointNet())
    boards = ((f"SN{i:06d}", torch.rand(64, 3, 48, 48, device="cuda")) for i in range(200))
    for serial, labels in run_line(insp, boards):
        pass
