"""Exoplanet transit vetting on folded light curves (TESS-style), forward compiled with max-autotune."""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final, Generic, NamedTuple, TypeVar

import torch
from torch import Tensor, nn

GLOBAL_BINS: Final[int] = 2001
LOCAL_BINS: Final[int] = 201
K = TypeVar("K")


class View(enum.Enum):
    GLOBAL = "global"
    LOCAL = "local"
    BOTH = "both"


class Vetting(NamedTuple):
    planet_prob: Tensor
    depth_ppm: Tensor


@dataclass(slots=True)
class Detrend:
    sigma_clip: float = 3.0
    stellar_density: float = 1.41


class ResultCache(Generic[K]):
    __slots__ = ("_store",)

    def __init__(self) -> None:
        self._store: dict[K, Vetting] = {}

    def put(self, key: K, value: Vetting) -> None:
        self._store[key] = value

    def __len__(self) -> int:
        return len(self._store)


class AstroNet(nn.Module):
    def __init__(self, view: View, detrend: Detrend) -> None:
        super().__init__()
        self.view: View = view
        self.detrend: Detrend = detrend
        self.g: nn.Sequential = nn.Sequential(nn.Conv1d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool1d(5), nn.Conv1d(16, 32, 5, padding=2), nn.ReLU(), nn.AdaptiveMaxPool1d(8))
        self.l: nn.Sequential = nn.Sequential(nn.Conv1d(1, 16, 5, padding=2), nn.ReLU(), nn.AdaptiveMaxPool1d(8))
        self.fc: nn.Linear = nn.Linear(32 * 8 + 16 * 8, 1)

    def forward(self, glob: Tensor, loc: Tensor) -> Vetting:
        clip: float = self.detrend.sigma_clip  # HAZARD: python-scalar
        glob = glob.clamp(-clip, clip)
        in_transit: Tensor = loc < -1.0
        depth: Tensor = -loc[in_transit].mean() * 1e6  # HAZARD: dynamic-shape
        if depth > 5e4:  # HAZARD: dynamic-control-flow
            depth = depth * 0.0
        match self.view:  # CLEAN: view enum fixed for the model's life
            case View.GLOBAL:
                loc = torch.zeros_like(loc)
            case View.LOCAL:
                glob = torch.zeros_like(glob)
            case View.BOTH:
                pass
        h: Tensor = torch.cat([self.g(glob[:, None]).flatten(1), self.l(loc[:, None]).flatten(1)], 1)
        prob: Tensor = torch.sigmoid(self.fc(h)).squeeze(-1)
        print("batch max prob", prob.max())  # HAZARD: host-code
        return Vetting(prob, depth.expand_as(prob))


detrend: Detrend = Detrend()
model: AstroNet = AstroNet(View.BOTH, detrend).cuda().eval()
model.forward = torch.compile(model.forward, mode="max-autotune")
prefit: AstroNet = AstroNet(View.LOCAL, Detrend()).cuda().eval()
prefit_fn = torch.compile(prefit, mode="max-autotune-no-cudagraphs")


def vet_sector(targets: dict[int, tuple[Tensor, Tensor]]) -> ResultCache[int]:
    cache: ResultCache[int] = ResultCache()
    with torch.no_grad():
        for tic_id, (glob, loc) in targets.items():
            out: Vetting = model(glob, loc)
            cache.put(tic_id, out)  # HAZARD: static-address
    return cache


def vet_sector_safe(targets: dict[int, tuple[Tensor, Tensor]]) -> dict[int, float]:
    scores: dict[int, float] = {}
    with torch.no_grad():
        for tic_id, (glob, loc) in targets.items():
            scores[tic_id] = float(model(glob, loc).planet_prob.mean())  # CLEAN: reduced to a host float right away
            quick: Vetting = prefit_fn(glob, loc)  # CLEAN: no-cudagraphs compile, print and mask indexing are fine here
            scores[-tic_id] = quick.planet_prob.max().item()  # CLEAN: output of a compile without CUDA graphs
    return scores


if __name__ == "__main__":
    sector: dict[int, tuple[Tensor, Tensor]] = {
        tic: (torch.randn(8, GLOBAL_BINS, device="cuda"), torch.randn(8, LOCAL_BINS, device="cuda")) for tic in range(100, 140)
    }
    print(len(vet_sector(sector)), len(vet_sector_safe(sector)))
    detrend.sigma_clip = 4.0
    print(len(vet_sector_safe(sector)))
