"""Micro-benchmarks of audio-fingerprint hashing kernels (Shazam-style peaks), run through a graph helper."""
from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, NamedTuple

import numpy as np
import torch
from torch import Tensor

N_FRAMES: Final[int] = 1024
N_BINS: Final[int] = 512
FAN_OUT: Final[int] = 8


class Peaks(enum.Enum):
    TOPK = "topk"
    THRESHOLD = "threshold"


class Timing(NamedTuple):
    name: str
    ms: float


@dataclass(slots=True)
class HashKnobs:
    target_zone: float = 0.5
    freq_quant: int = 4
    history: list[float] = field(default_factory=list)


knobs: HashKnobs = HashKnobs()
SPEC: Tensor = torch.rand(N_FRAMES, N_BINS, device="cuda")
WINDOW_NP: np.ndarray = np.hamming(N_BINS).astype(np.float32)


def topk_peaks(spec: Tensor) -> Tensor:
    vals, idx = spec.topk(FAN_OUT, dim=-1)  # CLEAN: fixed-k topk, static output shape
    return idx * 1000 + (vals * 100).long()


def threshold_peaks(spec: Tensor) -> Tensor:
    masked: Tensor = spec.masked_fill(spec < 0.9, 0.0)  # CLEAN: masked_fill keeps the shape static
    hashes: Tensor = torch.unique(masked.argmax(-1))  # HAZARD: dynamic-shape
    return hashes


def windowed_hash(spec: Tensor) -> Tensor:
    win: Tensor = torch.from_numpy(WINDOW_NP).cuda(non_blocking=True)  # HAZARD: pinned-memory
    return (spec * win).argmax(-1)


def zone_hash(spec: Tensor) -> Tensor:
    zone: float = knobs.target_zone  # HAZARD: python-scalar
    anchors: Tensor = spec.argmax(-1)
    return anchors + (spec.roll(1, 0).argmax(-1) * zone).long() // knobs.freq_quant  # CLEAN: freq_quant never changes after start-up


def band_hash(spec: Tensor, *, bands: tuple[int, ...]) -> Tensor:
    edges: list[int] = spec.argmax(-1).bincount(minlength=N_BINS).topk(len(bands)).indices.tolist()  # HAZARD: host-sync
    return spec[:, sorted(edges)].argmax(-1)


def graph_bench(name: str, fn: Callable[[], Tensor], *, iters: int = 20) -> Timing:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(iters):
        knobs.target_zone = 0.5 + 0.01 * i
        g.replay()
    end.record()
    torch.cuda.synchronize()  # CLEAN: synchronize after the replays, outside the capture
    return Timing(name, start.elapsed_time(end) / iters)


CASES: Final[dict[str, Callable[[], Tensor]]] = {
    Peaks.TOPK.value: functools.partial(topk_peaks, SPEC),
    Peaks.THRESHOLD.value: functools.partial(threshold_peaks, SPEC),
    "windowed": functools.partial(windowed_hash, SPEC),
    "zone": functools.partial(zone_hash, SPEC),
    "bands": functools.partial(band_hash, SPEC, bands=(32, 64, 128)),
}


def eager_reference() -> dict[str, int]:
    return {name: int(fn().numel()) for name, fn in CASES.items()}  # CLEAN: eager run outside any capture


if __name__ == "__main__":
    print(eager_reference())
    for name, case in CASES.items():
        match Peaks(name) if name in {p.value for p in Peaks} else None:  # CLEAN: host-side enum dispatch, no tensor involved
            case Peaks.TOPK:
                print("baseline", graph_bench(name, case))
            case _:
                print(graph_bench(name, case))
