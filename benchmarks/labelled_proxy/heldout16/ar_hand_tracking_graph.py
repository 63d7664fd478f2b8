"""Hand tracking for AR camera filters (palm detector + landmark refiner).

Cloud-rendered filters for a video-chat app: the phone streams 256x256 frames,
the server returns 21 landmarks per hand and a "sparkle" mask the effect shader
reads when the user pinches. The whole per-frame pipeline is one CUDA graph.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

N_LM = 21


class PalmDetector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 32, 5, 2, 2), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU(),
            nn.Conv2d(64, 128, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d((28, 32)))
        self.cls = nn.Conv2d(128, 1, 1)
        self.reg = nn.Conv2d(128, 4, 1)

    def forward(self, img):
        f = self.backbone(img)
        return self.cls(f).flatten(1), self.reg(f).flatten(2).transpose(1, 2)


class LandmarkRefiner(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 48, 3, 2, 1), nn.ReLU(), nn.Conv2d(48, 96, 3, 2, 1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(96, N_LM * 3 + 1))

    def forward(self, crops):
        out = self.net(crops)
        return out[:, :-1].reshape(-1, N_LM, 3), out[:, -1].sigmoid()


class HandTracker:
    def __init__(self, max_hands: int = 2, crop: int = 128):
        self.det = PalmDetector().cuda().eval()
        self.refiner = LandmarkRefiner().cuda().eval()
        self.refine = torch.compile(self.refiner, mode="reduce-overhead")
        self.max_hands, self.crop = max_hands, crop
        self.fx_stream = torch.cuda.Stream()
        self.frame_idx = 0
        self.static_img = torch.zeros(1, 3, 256, 256, device="cuda")
        self.graph = torch.cuda.CUDAGraph()
        self._capture()

    def _crops(self, img, boxes):
        # boxes: (K, 4) normalised cx, cy, w, h -> one affine sampling grid per hand
        theta = torch.zeros(boxes.shape[0], 2, 3, device=img.device)
        theta[:, 0, 0] = boxes[:, 2]
        theta[:, 1, 1] = boxes[:, 3]
        theta[:, :, 2] = boxes[:, :2] * 2 - 1
        grid = F.affine_grid(theta, [boxes.shape[0], 3, self.crop, self.crop], align_corners=False)
        return F.grid_sample(img.expand(boxes.shape[0], -1, -1, -1), grid, align_corners=False)  # CLEAN: grid_sample is capturable after warm-up

    def _track(self, img, warm: bool):
        logits, reg = self.det(img)
        top, idx = logits[0].topk(self.max_hands)  # CLEAN: fixed k, no data-dependent shape
        boxes = reg[0, idx].sigmoid()
        crops = self._crops(img, boxes)
        refine = self.refiner if warm else self.refine
        lm, presence = refine(crops)  # HAZARD: api-misuse
        pinch_d = (lm[:, 4, :2] - lm[:, 8, :2]).norm(dim=-1)
        pinching = pinch_d[presence > 0.8]  # HAZARD: dynamic-shape
        with torch.cuda.stream(self.fx_stream):  # HAZARD: stream
            sparkle = torch.zeros(self.max_hands, 64, device=img.device)
            sparkle[: pinching.shape[0]] = 1.0
        self.frame_idx += 1  # HAZARD: host-code
        return lm, presence, sparkle

    @torch.no_grad()
    def _capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # CLEAN: warm-up on a forked side stream, joined below
            for _ in range(3):
                self._track(self.static_img, warm=True)
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph):
            self.static_out = self._track(self.static_img, warm=False)

    @torch.no_grad()
    def on_camera_frame(self, frame):
        small = F.interpolate(frame, size=(256, 256), mode="bilinear", align_corners=False)
        self.static_img.copy_(small)  # CLEAN: resize outside the graph, then copy_ into the static input
        self.graph.replay()
        lm, presence, sparkle = self.static_out
        return lm.clone(), presence.clone(), sparkle.clone()


if __name__ == "__main__":
    tracker = HandTracker()
    for _ in range(30):
        frame = torch.rand(1, 3, 720, 1280, device="cuda")
        lm, presence, sparkle = tracker.on_camera_frame(frame)
    print(lm.shape, presence, tracker.frame_idx)
