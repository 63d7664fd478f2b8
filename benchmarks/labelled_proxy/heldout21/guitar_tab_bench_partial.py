"""Latency benchmarks for a TabCNN guitar-tablature model (CQT window -> 6 strings x 21 classes).
`bench.py` from the tab-transcription repo: each case is a functools.partial handed to a
helper that captures it into a CUDA graph and times replays; `bench_cold` measures the
first capture + replay of a freshly built model for the cold-start row of the table."""
import functools
import time

import numpy as np
import torch
import torch.nn as nn

BINS, CTX, STRINGS, CLASSES = 192, 9, 6, 21


class TabCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(),
                                  nn.Conv2d(64, 64, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten())
        self.fc = nn.Sequential(nn.Linear(64 * 93, 128), nn.ReLU(), nn.Linear(128, STRINGS * CLASSES))
        self.onset = nn.Linear(64 * 93, STRINGS)

    def forward(self, x):                                 # (B, 1, BINS, CTX)
        return self.fc(self.conv(x)).view(-1, STRINGS, CLASSES)


def bench_graphed(fn, iters=200, warmup=5):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # CLEAN: warm-up stream forked and joined
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    torch.cuda.synchronize()  # CLEAN: synchronize outside the capture, before timing
    t0 = time.perf_counter()
    for _ in range(iters):
        g.replay()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


def bench_cold(fn):
    g = torch.cuda.CUDAGraph()
    t0 = time.perf_counter()
    with torch.cuda.graph(g):  # HAZARD: api-misuse
        fn()
    g.replay()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e6


@torch.no_grad()
def tab_infer(model, cqt):
    return model(cqt).argmax(-1)  # CLEAN: argmax stays on the device


@torch.no_grad()
def tab_decode(model, cqt):
    frets = model(cqt).argmax(-1).cpu()  # HAZARD: host-sync
    return frets.numpy()                                  # strings x frames for the tab renderer


@torch.no_grad()
def tab_from_audio(model, frames, filters_cpu):
    fb = filters_cpu.to(frames.device, non_blocking=True)  # HAZARD: pinned-memory
    cqt = torch.log1p((frames @ fb).abs())                  # (B*CTX, BINS)
    return model(cqt.view(-1, CTX, BINS).transpose(1, 2)[:, None]).argmax(-1)


@torch.no_grad()
def tab_with_onsets(model, cqt, side):
    feats = model.conv(cqt)
    with torch.cuda.stream(side):  # HAZARD: stream
        onsets = torch.sigmoid(model.onset(feats))
    frets = model.fc(feats).view(-1, STRINGS, CLASSES).argmax(-1)
    return frets, onsets


if __name__ == "__main__":
    cqt = torch.randn(64, 1, BINS, CTX, device="cuda")
    cold_model = TabCNN().cuda().eval()
    print(f"{'cold start':>12}: {bench_cold(functools.partial(tab_infer, cold_model, cqt)):8.1f} us")

    model = TabCNN().cuda().eval()
    model.load_state_dict(torch.load("tabcnn_guitarset.pt", weights_only=True))
    frames = torch.randn(64 * CTX, 2048, device="cuda")
    filters = torch.from_numpy(np.load("cqt_filters_2048x192.npy")).float()      # pageable host copy
    cases = {
        "infer": functools.partial(tab_infer, model, cqt),
        "decode": functools.partial(tab_decode, model, cqt),
        "from_audio": functools.partial(tab_from_audio, model, frames, filters),
        "onsets": functools.partial(tab_with_onsets, model, cqt, torch.cuda.Stream()),
    }
    for name, fn in cases.items():
        print(f"{name:>12}: {bench_graphed(fn):8.1f} us")

    compiled = torch.compile(model, mode="reduce-overhead")
    with torch.no_grad():
        for _ in range(3):
            compiled(cqt)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(200):
            out = compiled(cqt)  # CLEAN: cudagraph-tree replays timed on their own, not inside a manual capture
        torch.cuda.synchronize()
    print(f"{'compiled':>12}: {(time.perf_counter() - t0) / 200 * 1e6:8.1f} us")
