"""Notebook app: interactive segmentation explorer built with ipywidgets.

Cell 1 builds the widgets; moving a slider re-runs `on_change`, which replays a CUDA graph
of the segmentation head. Changing the "classes" dropdown re-captures.
"""
import ipywidgets as widgets
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from IPython.display import display

N_CLS = 21
H = W = 256


class SegHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU())
        self.cls = nn.Conv2d(64, N_CLS, 1)
        self.drop_gen = torch.Generator(device="cuda").manual_seed(0)

    def forward(self, x, active):
        f = self.backbone(x)
        keep = torch.rand(f.shape[:2], device=x.device, generator=self.drop_gen) > 0.1  # HAZARD: rng
        f = f * keep[..., None, None]
        logits = F.interpolate(self.cls(f), size=(H, W), mode="bilinear")
        logits = logits.masked_fill(~active.view(1, -1, 1, 1), -1e4)  # CLEAN: masked_fill with a device mask
        print(f"logit range {logits.min()}..{logits.max()}")  # HAZARD: host-sync
        labels = logits.argmax(1)
        fg_scores = logits.amax(1)[labels > 0]  # HAZARD: dynamic-shape
        return labels, fg_scores.mean()


class Explorer:
    def __init__(self, image: np.ndarray):
        self.model = SegHead().cuda().eval()
        self.x = torch.from_numpy(image).permute(2, 0, 1)[None].float().cuda() / 255
        self.active = torch.ones(N_CLS, dtype=torch.bool, device="cuda")
        self.graph = torch.cuda.CUDAGraph()
        self.out = widgets.Output()
        self._warmup()
        self._capture()

    def _warmup(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.no_grad():
            for _ in range(3):
                self.model(self.x, self.active)
        torch.cuda.current_stream().wait_stream(s)

    def _capture(self):
        with torch.no_grad(), torch.cuda.graph(self.graph):  # HAZARD: api-misuse
            self.labels, self.fg_mean = self.model(self.x, self.active)

    def on_classes(self, change):
        chosen = set(change["new"])
        mask = torch.tensor([i in chosen for i in range(N_CLS)], device="cuda")  # CLEAN: eager, outside the capture
        self.active.copy_(mask)  # CLEAN: copy_ into the captured mask
        self._capture()
        self.render()

    def on_brightness(self, change):
        self.x.mul_(change["new"] / max(change["old"], 1e-3))  # CLEAN: in-place update of the static input
        self.render()

    def render(self):
        self.graph.replay()
        with self.out:
            self.out.clear_output(wait=True)
            counts = torch.bincount(self.labels.flatten(), minlength=N_CLS).cpu()  # CLEAN: eager, after replay
            print({i: int(c) for i, c in enumerate(counts) if c > 0})

    def show(self):
        classes = widgets.SelectMultiple(options=list(range(N_CLS)), value=tuple(range(N_CLS)))
        bright = widgets.FloatSlider(value=1.0, min=0.2, max=2.0)
        classes.observe(self.on_classes, names="value")
        bright.observe(self.on_brightness, names="value")
        display(widgets.VBox([classes, bright, self.out]))
        self.render()
