"""Intraday PV power forecaster served from per-bucket CUDA graphs (typed runner)."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Final, Protocol, TypedDict

import numpy as np
import torch
from torch import Tensor, nn

CLIP_KW: Final[float] = 5000.0
BUCKETS: Final[tuple[int, ...]] = (16, 64, 256)
N_FEATS: Final[int] = 12


class SkyMode(enum.Enum):
    CLEAR_SKY = "clear"
    PERSISTENCE = "persist"


class PlantConfig(TypedDict):
    capacity_kw: float
    tilt_deg: list[float]


@dataclass(frozen=True, slots=True)
class ForecastSpec:
    mode: SkyMode
    horizon: int = 8
    cloud_threshold: float = 0.35


class IrradianceModel(Protocol):
    def __call__(self, feats: Tensor) -> Tensor: ...


class MlpIrradiance(nn.Module):
    def __init__(self, n_in: int, horizon: int) -> None:
        super().__init__()
        self.net: nn.Sequential = nn.Sequential(nn.Linear(n_in, 128), nn.GELU(), nn.Linear(128, horizon))

    def forward(self, feats: Tensor) -> Tensor:
        return self.net(feats)


@dataclass
class PvRunner:
    model: IrradianceModel
    spec: ForecastSpec
    plant: PlantConfig
    device: torch.device = torch.device("cuda")
    soiling_loss: float = 0.02
    graphs: dict[int, torch.cuda.CUDAGraph] = field(default_factory=dict)
    static_in: dict[int, Tensor] = field(default_factory=dict)
    static_out: dict[int, Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tilt_np: np.ndarray = np.radians(np.asarray(self.plant["tilt_deg"], dtype=np.float32))
        self.tilt_dev: Tensor = torch.from_numpy(self.tilt_np).to(self.device)  # CLEAN: uploaded once at construction, outside any capture
        self.pool = torch.cuda.graph_pool_handle()

    def _power(self, feats: Tensor) -> Tensor:
        ghi: Tensor = self.model(feats)
        match self.spec.mode:  # CLEAN: frozen-spec enum matched in Python, never changes after capture
            case SkyMode.CLEAR_SKY:
                ghi = ghi * torch.cos(self.tilt_dev).mean()  # CLEAN: device tilt tensor made before capture
            case SkyMode.PERSISTENCE:
                tilt: Tensor = torch.from_numpy(self.tilt_np).cuda()  # HAZARD: pinned-memory
                ghi = ghi * torch.cos(tilt).mean()
        soiling: float = self.soiling_loss  # HAZARD: python-scalar
        kw: Tensor = ghi * self.plant["capacity_kw"] * (1.0 - soiling) / 1000.0  # CLEAN: capacity from the config dict never changes
        cloudy: Tensor = feats[:, 0] > self.spec.cloud_threshold  # CLEAN: elementwise compare with a frozen float, stays on device
        if (n_cloudy := int(cloudy.sum())) > 0:  # HAZARD: host-sync
            kw = kw * (1.0 - 0.1 * n_cloudy / feats.shape[0])
        kw = torch.where(cloudy[:, None], kw * 0.8, kw)  # CLEAN: three-argument where is capturable
        return kw.clamp(0.0, CLIP_KW)  # CLEAN: Final float bound, constant

    @torch.no_grad()
    def build(self) -> None:
        side: torch.cuda.Stream = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        for b in BUCKETS:
            x: Tensor = torch.zeros(b, N_FEATS, device=self.device)
            with torch.cuda.stream(side):  # CLEAN: warm-up on a forked side stream
                for _ in range(3):
                    self._power(x)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):
                y: Tensor = self._power(x)
            self.graphs[b], self.static_in[b], self.static_out[b] = g, x, y

    def set_soiling(self, loss: float) -> None:
        self.soiling_loss = loss

    @staticmethod
    def _bucket(n: int) -> int:
        return next(b for b in BUCKETS if b >= n)

    def predict(self, feats: np.ndarray) -> Tensor:
        b: int = self._bucket(len(feats))
        padded: np.ndarray = np.zeros((b, N_FEATS), dtype=np.float32)
        padded[: len(feats)] = feats
        self.static_in[b] = torch.from_numpy(padded).to(self.device)  # HAZARD: static-address
        self.graphs[b].replay()
        return self.static_out[b][: len(feats)].clone()

    def predict_pinned(self, feats: np.ndarray) -> Tensor:
        b: int = self._bucket(len(feats))
        host: Tensor = torch.zeros(b, N_FEATS).pin_memory()
        host[: len(feats)] = torch.from_numpy(feats)
        self.static_in[b].copy_(host, non_blocking=True)  # CLEAN: copy_ into the static input from pinned memory
        self.graphs[b].replay()
        return self.static_out[b][: len(feats)].clone()  # CLEAN: cloned before the next replay


def main() -> None:
    plant: PlantConfig = {"capacity_kw": 850.0, "tilt_deg": [25.0, 30.0, 35.0]}
    runner = PvRunner(MlpIrradiance(N_FEATS, 8).cuda().eval(), ForecastSpec(SkyMode.PERSISTENCE), plant)
    runner.build()
    for hour in range(24):
        runner.set_soiling(0.02 + 0.001 * hour)
        out: Tensor = runner.predict(np.random.rand(40, N_FEATS).astype(np.float32))
        print(hour, float(out.sum()))  # CLEAN: host read after replay, outside the capture


if __name__ == "__main__":
    main()
