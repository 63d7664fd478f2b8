"""Streaming beat / downbeat tracker for the DJ deck (sync + beat-grid overlay).

Spectral-flux front end + TCN (madmom/BeatNet style). The deck pushes 100 ms hops of the
log-mel spectrogram; the analysis graph is captured in `build()` and replayed in `push()`.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HOP_FRAMES = 10
CONTEXT = 256


class BeatTCN(nn.Module):
    def __init__(self, n_mels=81, ch=20):
        super().__init__()
        self.front = nn.Conv1d(n_mels, ch, 3, padding=1)
        self.tcn = nn.ModuleList(nn.Conv1d(ch, ch, 5, padding=2 * 2 ** i, dilation=2 ** i)
                                 for i in range(8))
        self.head = nn.Conv1d(ch, 2, 1)      # beat, downbeat

    def forward(self, mel):
        h = F.elu(self.front(mel))
        for conv in self.tcn:
            h = h + F.elu(conv(h))
        return torch.sigmoid(self.head(h))


class BeatTracker:
    def __init__(self, net, thr=0.35):
        self.net = net.cuda().eval()
        self.thr = thr
        self.ring = torch.zeros(1, 81, CONTEXT, device="cuda")
        self.hop_in = torch.zeros(1, 81, HOP_FRAMES, device="cuda")
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(1234)
        self.graph = torch.cuda.CUDAGraph()

    @torch.no_grad()
    def _analyse(self):
        self.ring.copy_(torch.cat([self.ring[..., HOP_FRAMES:], self.hop_in], dim=-1))  # CLEAN: ring buffer shifted in place
        amp = np.random.uniform(0.5, 1.0) * 1e-4  # HAZARD: host-code
        snapshot = self.gen.clone_state()  # HAZARD: rng
        dither = torch.randn(self.ring.shape, device="cuda", generator=self.gen)  # CLEAN: generator registered with the graph
        act = self.net(self.ring + amp * dither)
        beat = act[:, 0]
        peak = (beat > self.thr) & (beat >= F.max_pool1d(beat, 7, 1, 3))  # CLEAN: peak picking as a device-side mask
        peaks = torch.nonzero(beat[0] > self.thr)  # HAZARD: dynamic-shape
        torch.cuda.empty_cache()  # HAZARD: memory
        self.rewind_state = snapshot
        return act, peak.float(), peaks

    def build(self):
        self.graph.register_generator_state(self.gen)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._analyse()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self.act, self.peak_mask, self.peaks = self._analyse()

    def push(self, hop_mel):
        self.hop_in.copy_(hop_mel)  # CLEAN: static input written in place
        self.graph.replay()
        return self.act, self.peak_mask


def beat_grid(tracker, hops, fps=100):
    tracker.build()
    times = []
    for k, hop in enumerate(hops):
        _, mask = tracker.push(hop)
        idx = torch.nonzero(mask[0]).flatten()  # CLEAN: eager, after replay
        times.extend(((k * HOP_FRAMES - CONTEXT + idx) / fps).tolist())
    ibi = np.diff(np.unique(np.round(times, 2)))
    return 60.0 / np.median(ibi) if len(ibi) else None
