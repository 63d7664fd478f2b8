"""Broadcast tennis ball tracking (TrackNet-style heatmaps) served with reduce-overhead."""
from __future__ import annotations

import enum
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, NamedTuple

import torch
from torch import Tensor, nn

FRAMES_IN: Final[int] = 3
H: Final[int] = 288
W: Final[int] = 512
HEAT_THRESHOLD: Final[float] = 0.5


class Surface(enum.Enum):
    HARD = "hard"
    CLAY = "clay"
    GRASS = "grass"


class BallFix(NamedTuple):
    heat: Tensor
    xy: Tensor


@dataclass(frozen=True, slots=True)
class CourtSpec:
    surface: Surface = Surface.HARD
    bounce_gain: float = 1.0


class TrackNetLite(nn.Module):
    def __init__(self, court: CourtSpec) -> None:
        super().__init__()
        self.court: CourtSpec = court
        self.enc: nn.Sequential = nn.Sequential(nn.Conv2d(3 * FRAMES_IN, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 1, 3, padding=1))

    def forward(self, clip: Tensor) -> BallFix:
        heat: Tensor = torch.sigmoid(self.enc(clip)).squeeze(1)
        match self.court.surface:  # CLEAN: surface enum from a frozen spec, one compiled variant
            case Surface.CLAY:
                heat = heat * 0.95
            case Surface.HARD | Surface.GRASS:
                heat = heat * self.court.bounce_gain  # CLEAN: frozen float, never reassigned
        flat: Tensor = heat.flatten(1)
        idx: Tensor = flat.argmax(-1)
        xy: Tensor = torch.stack([idx % W, idx // W], -1).float()
        if flat.max() < HEAT_THRESHOLD:  # HAZARD: dynamic-control-flow
            xy = xy * float("nan")
        return BallFix(heat, xy)


court: CourtSpec = CourtSpec(Surface.CLAY)
net: TrackNetLite = TrackNetLite(court).cuda().eval()
track = torch.compile(net, mode="reduce-overhead")


@torch.compile(mode="reduce-overhead")
def bounce_score(xy_hist: Tensor) -> Tensor:
    t0: float = time.time()  # HAZARD: host-code
    vy: Tensor = xy_hist[1:, 1] - xy_hist[:-1, 1]
    flips: Tensor = (vy[1:] * vy[:-1]) < 0
    n_flips: int = int(flips.sum())  # HAZARD: host-sync
    return flips.float() * (n_flips + 0.0 * t0)


def clips(video: Tensor) -> Iterator[Tensor]:
    for t in range(FRAMES_IN, video.shape[0]):
        yield video[t - FRAMES_IN : t].flatten(0, 1)[None]


def run_rally(video: Tensor) -> tuple[list[Tensor], list[Tensor]]:
    raw: list[Tensor] = []
    safe: list[Tensor] = []
    with torch.no_grad():
        for clip in clips(video):
            fix: BallFix = track(clip)
            raw.append(fix.xy)  # HAZARD: static-address
            safe.append(fix.heat.amax().clone())  # CLEAN: reduced and cloned before the next call
    return raw, safe


def run_highlights(segments: list[Tensor]) -> list[Tensor]:
    scores: list[Tensor] = []
    with torch.no_grad():
        for xy in segments:
            scores.append(bounce_score(xy).clone())  # HAZARD: dynamic-shape
    return scores


if __name__ == "__main__":
    video: Tensor = torch.rand(40, 3, H, W, device="cuda")
    raw, safe = run_rally(video)
    print(len(raw), torch.stack(safe).mean().item())  # CLEAN: host read of cloned values, outside compiled code
    rallies: list[Tensor] = [torch.rand(n, 2, device="cuda") * 500 for n in (25, 61, 14, 90)]
    print([s.shape for s in run_highlights(rallies)])
