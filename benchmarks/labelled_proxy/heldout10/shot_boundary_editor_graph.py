"""Shot-boundary detection for a consumer video editor's auto-cut feature.

A TransNet-style 3-D CNN runs over 100-frame windows of 48x27 thumbnails; the
middle 50 frames of each window get a cut probability. The timeline thumbnails
for the scrub bar are upscaled on a second stream. The editor streams windows
while the user scrubs, so one window step is captured and replayed.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

WIN, H, W = 100, 27, 48


class ShotNet(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv3d(3, c, 3, padding=1), nn.ReLU(),
            nn.Conv3d(c, 2 * c, 3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool3d((WIN, 1, 1)),
        )
        self.cls = nn.Linear(2 * c, 1)

    def forward(self, x):  # (B, 3, T, H, W) -> (B, T)
        f = self.body(x).flatten(2).transpose(1, 2)
        return self.cls(f).squeeze(-1)


class CutDetector:
    def __init__(self, net, batch=4, device="cuda"):
        self.net = net.eval().to(device)
        self.device = device
        self.frames = torch.zeros(batch, WIN, H, W, 3, dtype=torch.uint8, device=device)
        self.thumbs = torch.zeros(batch, 3, WIN, 2 * H, 2 * W, device=device)
        self.thumb_stream = torch.cuda.Stream()
        self.frames_seen = 0
        self.min_peak = 0.2
        self.graph = torch.cuda.CUDAGraph()
        self.out = None

    def _step(self):
        x = self.frames.permute(0, 4, 1, 2, 3).float() / 255.0
        with torch.cuda.stream(self.thumb_stream):  # HAZARD: stream
            self.thumbs.copy_(F.interpolate(x, scale_factor=(1, 2, 2), mode="trilinear"))
        self.frames_seen += x.shape[0] * WIN // 2  # HAZARD: host-code
        probs = torch.sigmoid(self.net(x))[:, WIN // 4: 3 * WIN // 4]
        if probs.max() < self.min_peak:  # HAZARD: dynamic-control-flow
            probs = torch.zeros_like(probs)
        cut_idx = (probs > 0.5).nonzero()  # HAZARD: dynamic-shape
        peak = probs == F.max_pool1d(probs.unsqueeze(1), 9, 1, 4).squeeze(1)
        is_cut = (probs > 0.5) & peak  # CLEAN: dense boolean map, no nonzero
        return probs, is_cut, cut_idx

    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # CLEAN: warm-up stream, forked and joined outside the capture
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self.out = self._step()

    def push_windows(self, frames_u8):
        self.frames.copy_(frames_u8)  # CLEAN: copy into the static input
        self.graph.replay()
        probs, is_cut, _ = self.out
        cuts = is_cut.nonzero()  # CLEAN: nonzero on the replay output, eager code
        return probs.clone(), cuts.cpu()


def auto_cut(detector, reader, batch=4):
    detector.capture()
    stride = WIN // 2
    timeline = []
    for start, frames in reader.windows(WIN, stride, batch):
        probs, cuts = detector.push_windows(frames)
        for b, t in cuts.tolist():
            timeline.append(start + b * stride + WIN // 4 + t)
    return sorted(set(timeline))


if __name__ == "__main__":
    net = ShotNet()
    net.load_state_dict(torch.load("shotnet.pt", map_location="cpu"))
    det = CutDetector(net)
