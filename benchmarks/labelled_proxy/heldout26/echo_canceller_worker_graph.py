"""Neural acoustic echo cancellation for a conferencing speakerphone (16 kHz, 10 ms hops).

The audio callback (sound-card thread) hands near-end mic frames and far-end loudspeaker
frames to a worker thread through a lock-free ring. The worker replays one captured graph per
hop: a partitioned-block NLMS linear stage followed by a small GRU residual-echo suppressor.
Tuning parameters live in a JSON file that the DSP engineer hot-reloads during calls.
"""
import json
import threading

import numpy as np
import torch
import torch.nn as nn

HOP, BLK, NBLK = 160, 320, 16


class ResidualSuppressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(2 * (BLK // 2 + 1), 256, batch_first=True)
        self.mask = nn.Linear(256, BLK // 2 + 1)
        self.register_buffer("h", torch.zeros(1, 1, 256))

    def forward(self, err_mag, far_mag):
        out, h = self.gru(torch.cat([err_mag, far_mag], -1).unsqueeze(1), self.h)
        self.h.copy_(h)
        return torch.sigmoid(self.mask(out.squeeze(1)))


class AecWorker:
    def __init__(self, cfg_path, dev="cuda"):
        self.dev, self.cfg_path = dev, cfg_path
        self.cfg = json.load(open(cfg_path))
        self.rs = ResidualSuppressor().to(dev).eval()
        self.near = torch.zeros(1, BLK, device=dev)
        self.far_hist = torch.zeros(NBLK, BLK // 2 + 1, dtype=torch.complex64, device=dev)
        self.W = torch.zeros_like(self.far_hist)
        self.far_np = np.zeros((1, BLK), dtype=np.float32)
        self.stats_stream = torch.cuda.Stream()
        self.cap_stream = torch.cuda.Stream()
        self.win = torch.hann_window(BLK, device=dev)

    def _hop(self):
        far = torch.from_numpy(self.far_np).to(self.dev, non_blocking=True)  # HAZARD: pinned-memory
        X = torch.fft.rfft(far * self.win)
        self.far_hist.copy_(torch.cat([X, self.far_hist[:-1]]))
        Y = torch.fft.rfft(self.near * self.win)
        E = Y - (self.W * self.far_hist).sum(0, keepdim=True)
        mu = self.cfg["nlms_step"]  # HAZARD: python-scalar
        power = self.far_hist.abs().pow(2).sum(0, keepdim=True) + 1e-6
        dtd = (E.abs().pow(2).sum() / (Y.abs().pow(2).sum() + 1e-9))
        if dtd > 0.7:  # HAZARD: dynamic-control-flow
            mu = 0.0
        self.W.add_(mu * self.far_hist.conj() * E / power)
        gain = self.rs(E.abs(), X.abs())
        self.out = torch.fft.irfft(E * gain, n=BLK)[:, :HOP]
        with torch.cuda.stream(self.stats_stream):  # HAZARD: stream
            self.erle = 10 * torch.log10(Y.abs().pow(2).sum() / (E.abs().pow(2).sum() + 1e-9))
        comfort = 1e-4 * torch.randn_like(self.out)  # CLEAN: default-generator CUDA RNG is capturable
        self.out.add_(comfort)
        return self.out

    def capture(self):
        self.cap_stream.wait_stream(torch.cuda.current_stream())
        with torch.no_grad(), torch.cuda.stream(self.cap_stream):  # CLEAN: capture_begin on a side stream, joined below
            for _ in range(3):
                self._hop()
            self.graph = torch.cuda.CUDAGraph()
            self.graph.capture_begin()
            self._hop()
            self.graph.capture_end()
        torch.cuda.current_stream().wait_stream(self.cap_stream)
        self.rs.h.zero_()

    def process(self, near_np, far_np):
        self.far_np[:] = far_np
        self.near.copy_(torch.from_numpy(near_np).to(self.dev))
        self.graph.replay()
        return self.out.cpu().numpy()  # CLEAN: read-back after replay


def reload_loop(worker, stop):
    while not stop.wait(1.0):
        worker.cfg = json.load(open(worker.cfg_path))


def run(ring, cfg_path):
    worker = AecWorker(cfg_path)
    worker.capture()
    stop = threading.Event()
    threading.Thread(target=reload_loop, args=(worker, stop), daemon=True).start()
    while ring.active():
        near, far = ring.pop()
        ring.push_out(worker.process(near, far))
    stop.set()
