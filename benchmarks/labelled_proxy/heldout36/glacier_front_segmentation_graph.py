"""Glacier calving-front delineation on SAR tiles, replayed from a captured CUDA graph."""
from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import numpy as np
import torch
from torch import Tensor, nn

TILE: Final[int] = 256
BATCH: Final[int] = 8
N_CLASSES: Final[int] = 4  # ocean, ice melange, glacier, rock


class Polarisation(enum.Enum):
    HH = "HH"
    VV = "VV"


@dataclass(frozen=True, slots=True)
class SarSpec:
    pol: Polarisation = Polarisation.HH
    speckle_looks: int = 4


class FrontNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.down: nn.Sequential = nn.Sequential(nn.Conv2d(1, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU())
        self.up: nn.Sequential = nn.Sequential(nn.Upsample(scale_factor=4, mode="bilinear"), nn.Conv2d(64, N_CLASSES, 3, padding=1))

    def forward(self, x: Tensor) -> Tensor:
        return self.up(self.down(x))


class FrontRunner:
    def __init__(self, net: FrontNet, spec: SarSpec) -> None:
        self.net: FrontNet = net
        self.spec: SarSpec = spec
        self.sar: Tensor = torch.zeros(BATCH, 1, TILE, TILE, device="cuda")
        self.calib_db: np.ndarray = np.linspace(-25.0, 5.0, 256, dtype=np.float32)
        self.graph: torch.cuda.CUDAGraph = torch.cuda.CUDAGraph()

    @contextlib.contextmanager
    def _precision(self) -> Iterator[None]:
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            yield

    def _segment(self) -> Tensor:
        lut: Tensor = torch.from_numpy(self.calib_db).to(self.sar.device)  # HAZARD: pinned-memory
        db: Tensor = lut[(self.sar.clamp(0, 1) * 255).long()]  # CLEAN: gather with a CUDA index tensor
        match self.spec.pol:  # CLEAN: polarisation enum from a frozen spec
            case Polarisation.VV:
                db = db + 1.5
            case Polarisation.HH:
                pass
        smooth: Tensor = nn.functional.avg_pool2d(db, self.spec.speckle_looks | 1, 1, self.spec.speckle_looks // 2)  # CLEAN: frozen int kernel size
        logits: Tensor = self.net(smooth)
        if logits.isnan().any():  # HAZARD: dynamic-control-flow
            logits = torch.nan_to_num(logits)
        labels: Tensor = logits.argmax(1)
        glacier: Tensor = labels == 2
        front_px: Tensor = glacier ^ glacier.roll(1, -1)
        front_xy: Tensor = front_px.nonzero()  # HAZARD: dynamic-shape
        self.n_front: Tensor = front_xy.shape[0] * torch.ones((), device="cuda")
        return torch.where(front_px, 1.0, 0.0)  # CLEAN: three-argument where

    @torch.no_grad()
    def capture(self) -> None:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._segment()
        torch.cuda.current_stream().wait_stream(side)
        with self._precision(), torch.cuda.graph(self.graph):
            self.front: Tensor = self._segment()

    def delineate(self, tiles: Tensor) -> Tensor:
        self.sar.copy_(tiles)
        self.graph.replay()
        return self.front.clone()


if __name__ == "__main__":
    runner = FrontRunner(FrontNet().cuda().eval(), SarSpec(Polarisation.HH))
    runner.capture()
    for scene in range(12):
        fronts: Tensor = runner.delineate(torch.rand(BATCH, 1, TILE, TILE, device="cuda"))
        print(scene, int(fronts.sum()))  # CLEAN: host read after replay, outside the capture
