"""Field-level maize yield estimation from UAV multispectral patches, via a graph-on-first-call decorator."""
from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, ParamSpec, TypeVar

import torch
from torch import Tensor, nn

P = ParamSpec("P")
R = TypeVar("R")
log: logging.Logger = logging.getLogger("yield")
N_BANDS: Final[int] = 5
PATCH: Final[int] = 64
N_PATCHES: Final[int] = 96


def graphed_on_first_call(fn: Callable[P, R]) -> Callable[P, R]:
    """Warm up on a side stream, capture on the first call, replay afterwards (static args only)."""
    state: dict[str, object] = {}

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        if "graph" not in state:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # CLEAN: warm-up on a forked side stream
                for _ in range(3):
                    fn(*args, **kwargs)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):  # CLEAN: default side-stream capture after warm-up
                state["out"] = fn(*args, **kwargs)
            state["graph"] = g
        state["graph"].replay()  # type: ignore[attr-defined]
        return state["out"]  # type: ignore[return-value]

    return wrapper


@dataclass(slots=True)
class Agronomy:
    nitrogen_kg_ha: float = 180.0
    growth_stage: int = 6


class YieldCnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.feat: nn.Sequential = nn.Sequential(nn.Conv2d(N_BANDS, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.reg: nn.Linear = nn.Linear(64 + 1, 1)


class FieldEstimator:
    def __init__(self, net: YieldCnn, agro: Agronomy) -> None:
        self.net: YieldCnn = net
        self.agro: Agronomy = agro
        self.patches: Tensor = torch.zeros(N_PATCHES, N_BANDS, PATCH, PATCH, device="cuda")
        self.band_gain: list[float] = [1.0, 1.02, 0.98, 1.05, 1.1]
        self.stats: torch.cuda.Stream = torch.cuda.Stream()
        self.red: Final[int] = 2
        self.nir: Final[int] = 4

    @graphed_on_first_call
    def estimate(self) -> Tensor:
        gain: Tensor = torch.as_tensor(self.band_gain, dtype=torch.float32).cuda()  # HAZARD: pinned-memory
        x: Tensor = self.patches * gain.view(1, -1, 1, 1)
        ndvi: Tensor = (x[:, self.nir] - x[:, self.red]) / (x[:, self.nir] + x[:, self.red] + 1e-6)  # CLEAN: Final int band indices
        n_rate: float = self.agro.nitrogen_kg_ha / 200.0  # HAZARD: python-scalar
        feats: Tensor = self.net.feat(x).flatten(1)
        t_ha: Tensor = self.net.reg(torch.cat([feats, ndvi.mean((1, 2))[:, None] * n_rate], 1)).squeeze(-1)
        if ndvi.mean() < 0.2:  # HAZARD: dynamic-control-flow
            t_ha = t_ha * 0.5
        with torch.cuda.stream(self.stats):  # HAZARD: stream
            spread: Tensor = t_ha.std()
        log.info(f"field spread {spread:.2f} t/ha")  # HAZARD: host-sync
        stage_bonus: float = 0.05 if self.agro.growth_stage >= 5 else 0.0  # CLEAN: int stage compared on the host, constant for the season
        return t_ha.clamp(0.0, 20.0) * (1.0 + stage_bonus)


def run_season(est: FieldEstimator, flights: list[Tensor]) -> list[float]:
    totals: list[float] = []
    with torch.no_grad():
        for i, flight in enumerate(flights):
            est.patches.copy_(flight)  # CLEAN: copy_ into the captured input
            est.agro.nitrogen_kg_ha = 180.0 + 20.0 * i
            per_patch: Tensor = est.estimate()
            totals.append(float(per_patch.mean()))  # CLEAN: host read after replay, outside the capture
    return totals


if __name__ == "__main__":
    estimator = FieldEstimator(YieldCnn().cuda().eval(), Agronomy())
    data: list[Tensor] = [torch.rand(N_PATCHES, N_BANDS, PATCH, PATCH, device="cuda") for _ in range(6)]
    print(run_season(estimator, data))
