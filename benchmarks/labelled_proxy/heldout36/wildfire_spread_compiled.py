"""Wildfire perimeter spread emulator (cellular surrogate CNN) with options={"triton.cudagraphs": True}."""
from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import Final, NamedTuple, TypedDict

import torch
from torch import Tensor, nn

log: logging.Logger = logging.getLogger("fire")
GRID: Final[int] = 256
N_FUEL: Final[int] = 13
STEPS_PER_HOUR: Final[int] = 6


class FuelModel(enum.Enum):
    ANDERSON_13 = 13
    SCOTT_BURGAN_40 = 40


class Weather(TypedDict):
    wind_u: float
    wind_v: float
    rh_pct: float


class Spread(NamedTuple):
    burning: Tensor
    intensity: Tensor


@dataclass(frozen=True, slots=True)
class Terrain:
    fuel_model: FuelModel = FuelModel.ANDERSON_13
    cell_m: float = 30.0


class SpreadCnn(nn.Module):
    def __init__(self, terrain: Terrain) -> None:
        super().__init__()
        self.terrain: Terrain = terrain
        self.net: nn.Sequential = nn.Sequential(nn.Conv2d(2 + N_FUEL + 2, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 1, 3, padding=1))

    def forward(self, burning: Tensor, fuel: Tensor, wind: Tensor) -> Tensor:
        match self.terrain.fuel_model:  # CLEAN: frozen terrain enum, constant per model
            case FuelModel.ANDERSON_13:
                f: Tensor = fuel
            case FuelModel.SCOTT_BURGAN_40:
                f = fuel * 0.8
        return torch.sigmoid(self.net(torch.cat([burning, 1 - burning, f, wind], 1)))


terrain: Terrain = Terrain()
model: SpreadCnn = SpreadCnn(terrain).cuda().eval()
weather: Weather = {"wind_u": 3.0, "wind_v": -1.0, "rh_pct": 25.0}


@torch.compile(options={"triton.cudagraphs": True})
def advance(burning: Tensor, fuel: Tensor) -> Spread:
    u: float = weather["wind_u"]  # HAZARD: python-scalar
    wind: Tensor = torch.empty(burning.shape[0], 2, GRID, GRID, device=burning.device)
    wind[:, 0], wind[:, 1] = u, -1.0
    p: Tensor = model(burning, fuel, wind)
    fuel.mul_(1.0 - 0.2 * burning)  # HAZARD: static-address
    new: Tensor = torch.maximum(burning, (p > 0.5).float())  # CLEAN: elementwise compare, static shape
    area_ha: float = new.sum().item() * (terrain.cell_m ** 2) / 1e4  # HAZARD: host-sync
    log.info("burned area %.1f ha", area_ha)  # HAZARD: host-code
    return Spread(new, p * (terrain.cell_m / 30.0))  # CLEAN: frozen float cell size


@torch.compile(options={"triton.cudagraphs": True})
def advance_pure(burning: Tensor, fuel: Tensor) -> tuple[Tensor, Tensor]:
    wind: Tensor = torch.zeros(burning.shape[0], 2, GRID, GRID, device=burning.device)
    p: Tensor = model(burning, fuel, wind)
    return torch.maximum(burning, (p > 0.5).float()), fuel * (1.0 - 0.2 * burning)  # CLEAN: fuel returned out of place, input untouched


def simulate(hours: int) -> Tensor:
    burning: Tensor = torch.zeros(1, 1, GRID, GRID, device="cuda")
    burning[..., GRID // 2, GRID // 2] = 1.0
    fuel: Tensor = torch.rand(1, N_FUEL, GRID, GRID, device="cuda")
    with torch.no_grad():
        for h in range(hours):
            weather["wind_u"] = 3.0 + 0.5 * h
            for _ in range(STEPS_PER_HOUR):
                out: Spread = advance(burning, fuel)
                burning = out.burning.clone()  # CLEAN: cloned before the next compiled call overwrites it
            b2, f2 = burning.clone(), fuel.clone()
            for _ in range(STEPS_PER_HOUR):
                b2, f2 = (t.clone() for t in advance_pure(b2, f2))
    return burning


if __name__ == "__main__":
    print(simulate(hours=8).sum().item())
