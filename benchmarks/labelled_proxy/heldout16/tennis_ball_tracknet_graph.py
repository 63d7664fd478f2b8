"""Ball tracking for tennis broadcasts (TrackNet-style heatmap regression).

Three consecutive frames, resized to 288x512 and stacked on channels, go through
an encoder-decoder that predicts a heatmap of the ball. The tracker keeps a short
history that the bounce / line-call module reads, and a longer one for the
on-screen trail. One graph per camera feed, replayed for every frame triple.
"""
import collections

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

H, W = 288, 512


def conv(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class TrackNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(conv(9, 64), conv(64, 64), nn.MaxPool2d(2),
                                 conv(64, 128), nn.MaxPool2d(2), conv(128, 256))
        self.dec = nn.Sequential(nn.Upsample(scale_factor=4), conv(256, 64), nn.Conv2d(64, 1, 1))

    def forward(self, frames):
        return self.dec(self.enc(frames)).squeeze(1)


class BallTracker:
    def __init__(self, net: TrackNet, court_mask: np.ndarray, min_conf: float = 0.5):
        self.net = net.cuda().eval()
        self.court_polygon_mask = court_mask    # uint8 HxW, redrawn when the director cuts to another camera
        self.min_conf = min_conf
        self.static_frames = torch.zeros(1, 9, H, W, device="cuda")
        self.static_xy = torch.zeros(2, device="cuda")
        self.static_conf = torch.zeros((), device="cuda")
        self.bounce_buf = collections.deque(maxlen=12)
        self.trail = collections.deque(maxlen=250)
        self.graph = torch.cuda.CUDAGraph()
        self._warmup_and_capture()

    def _locate(self, frames):
        heat = torch.sigmoid(self.net(frames))[0]
        court = torch.from_numpy(self.court_polygon_mask).cuda()  # HAZARD: pinned-memory
        heat = torch.where(court.bool(), heat, torch.zeros_like(heat))  # CLEAN: torch.where, no data-dependent shape
        if heat.max() < self.min_conf:  # HAZARD: dynamic-control-flow
            # ball probably motion-blurred: smooth the map before taking the peak
            heat = F.avg_pool2d(heat[None, None], 5, 1, 2)[0, 0]
        idx = heat.flatten().argmax()
        xy = torch.stack([idx % W, idx // W]).float()
        return xy, heat.max()

    @torch.no_grad()
    def _warmup_and_capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._locate(self.static_frames)
        torch.cuda.current_stream().wait_stream(side)
        self.graph.capture_begin()  # HAZARD: stream
        xy, conf = self._locate(self.static_frames)
        self.static_xy.copy_(xy)
        self.static_conf.copy_(conf)
        self.graph.capture_end()

    @torch.no_grad()
    def on_frames(self, f0, f1, f2):
        self.static_frames.copy_(torch.cat([f0, f1, f2], 0)[None])  # CLEAN: copy_ into the static input
        self.graph.replay()
        self.trail.append(self.static_xy.clone())  # CLEAN: cloned before it is kept
        self.bounce_buf.append(self.static_xy)  # HAZARD: static-address
        return self.static_conf

    def bounce_candidates(self):
        """Frames where the vertical velocity flips sign (ball hit the court)."""
        if len(self.bounce_buf) < 3:
            return []
        ys = torch.stack(list(self.bounce_buf))[:, 1]
        vy = ys[1:] - ys[:-1]
        flips = (vy[:-1] > 0) & (vy[1:] < 0)
        return flips.nonzero().flatten().tolist()  # CLEAN: nonzero and tolist run eagerly, outside the capture


def run_feed(tracker: BallTracker, frames):
    calls = []
    for t in range(2, len(frames)):
        conf = tracker.on_frames(frames[t - 2], frames[t - 1], frames[t])
        if float(conf) > 0.5:  # CLEAN: host read after replay
            calls.extend(tracker.bounce_candidates())
    return calls


if __name__ == "__main__":
    mask = np.ones((H, W), np.uint8)
    trk = BallTracker(TrackNet(), mask)
    clip = [torch.rand(3, H, W, device="cuda") for _ in range(60)]
    print(run_feed(trk, clip))
