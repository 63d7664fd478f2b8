"""Automotive corner radar: micro-Doppler target classification (pedestrian / cyclist /
vehicle / clutter) on the HIL bench GPU.

Stages mirror the ECU signal chain one-to-one so that each stage object can be swapped for
its embedded implementation during hardware-in-the-loop runs.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Stage:
    def __call__(self, x):
        raise NotImplementedError


class RangeGate(Stage):
    def __init__(self, gate_bins):
        self.gate_idx = list(gate_bins)

    def __call__(self, cube):  # cube: [chirps, range bins, rx channels]
        return cube[:, self.gate_idx]  # HAZARD: host-sync


class MicroDoppler(Stage):
    def __init__(self, n_fft=128):
        self.n_fft = n_fft

    def __call__(self, gated):
        win = torch.hann_window(self.n_fft).to("cuda")  # HAZARD: pinned-memory
        frames = gated.unfold(0, self.n_fft, self.n_fft // 4)  # [frames, gates, rx, n_fft]
        spec = torch.fft.rfft(frames * win, dim=-1).abs()
        return torch.log1p(spec).mean(dim=2)  # [frames, gates, bins]


class ClutterMap(Stage):
    def __init__(self, shape, alpha=0.1):
        self.alpha = alpha
        self.clutter = torch.zeros(shape, device="cuda")
        self.noise_floor = torch.zeros(shape, device="cuda")

    def __call__(self, spec):
        self.clutter = (1 - self.alpha) * self.clutter + self.alpha * spec.mean(0)  # HAZARD: static-address
        self.noise_floor.lerp_(spec.amin(0), self.alpha)  # CLEAN: in-place EMA keeps the captured address
        return (spec - self.clutter - self.noise_floor).clamp_min(0)


class CfarDetector(Stage):
    def __init__(self, guard=2, train=8, scale=3.0):
        self.k = 2 * (guard + train) + 1
        self.scale = scale
        self.stream = torch.cuda.Stream()

    def __call__(self, spec):
        flat = spec.flatten(0, 1)
        with torch.cuda.stream(self.stream):  # HAZARD: stream
            noise = F.avg_pool1d(flat.unsqueeze(1), self.k, 1, self.k // 2).squeeze(1)
        det = flat > self.scale * noise
        return torch.where(det, flat, 0.0).view_as(spec)


class TargetClassifier(nn.Module):
    def __init__(self, n_cls=4):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d((8, 8)))
        self.fc = nn.Linear(16 * 64, n_cls)

    def forward(self, m):
        return self.fc(self.conv(m.unsqueeze(1)).flatten(1))


class RadarPipeline:
    def __init__(self, stages, clf, cube_shape):
        self.stages, self.clf = stages, clf.cuda().eval()
        self.static_cube = torch.zeros(cube_shape, device="cuda")
        self.capture_stream = torch.cuda.Stream()
        self.graph = torch.cuda.CUDAGraph()

    @torch.no_grad()
    def _forward(self, cube):
        x = cube
        for st in self.stages:
            x = st(x)
        return self.clf(x.permute(1, 0, 2)).softmax(-1)  # one decision per range gate

    def build(self):
        self.capture_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.capture_stream):
            for _ in range(3):
                self._forward(self.static_cube)
            self.graph.capture_begin()  # CLEAN: capture_begin on the non-default capture stream
            self.static_probs = self._forward(self.static_cube)
            self.graph.capture_end()
        torch.cuda.current_stream().wait_stream(self.capture_stream)

    def on_frame(self, cube):
        self.static_cube.copy_(cube, non_blocking=True)  # CLEAN: frame copied into the captured input
        self.graph.replay()
        return self.static_probs.argmax(-1)


def make_bench_pipeline(gate_bins=range(40, 104), chirps=256, rx=4, n_fft=128):
    n_bins = n_fft // 2 + 1
    stages = [RangeGate(gate_bins), MicroDoppler(n_fft), ClutterMap((len(gate_bins), n_bins)), CfarDetector()]
    pipe = RadarPipeline(stages, TargetClassifier(), (chirps, 256, rx))
    pipe.build()
    return pipe
