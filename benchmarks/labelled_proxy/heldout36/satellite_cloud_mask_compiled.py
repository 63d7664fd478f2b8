"""Cloud/snow masking for multispectral tiles with options={"triton.cudagraphs": True}."""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final, NamedTuple, TypedDict

import torch
from torch import Tensor, nn

GREEN: Final[int] = 2
SWIR: Final[int] = 10
N_BANDS: Final[int] = 13
CG: Final[dict[str, bool]] = {"triton.cudagraphs": True}


class Sensor(enum.Enum):
    S2A = "sentinel-2a"
    L8 = "landsat-8"


class SceneConfig(TypedDict):
    ndsi_cut: float
    haze_weight: float


@dataclass(frozen=True, slots=True)
class Thresholds:
    cirrus: float = 0.012
    bright: float = 0.3


class MaskOut(NamedTuple):
    probs: Tensor
    snow: Tensor


class CloudUNetLite(nn.Module):
    def __init__(self, sensor: Sensor) -> None:
        super().__init__()
        self.sensor: Sensor = sensor
        self.enc: nn.Sequential = nn.Sequential(nn.Conv2d(N_BANDS, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 3, 1))

    def forward(self, x: Tensor) -> Tensor:
        match self.sensor:  # CLEAN: sensor enum fixed per model instance
            case Sensor.L8:
                x = x * 1.02
            case Sensor.S2A:
                pass
        return self.enc(x).softmax(1)


cfg: SceneConfig = {"ndsi_cut": 0.4, "haze_weight": 0.2}
limits: Thresholds = Thresholds()
net: CloudUNetLite = CloudUNetLite(Sensor.S2A).cuda().eval()


@torch.compile(options=CG)
def cloud_mask(tile: Tensor) -> MaskOut:
    probs: Tensor = net(tile)
    ndsi: Tensor = (tile[:, GREEN] - tile[:, SWIR]) / (tile[:, GREEN] + tile[:, SWIR] + 1e-6)  # CLEAN: Final band indices, constant slices
    cut: float = cfg["ndsi_cut"]  # HAZARD: python-scalar
    snow: Tensor = ndsi > cut
    cirrus: Tensor = tile[:, SWIR] > limits.cirrus  # CLEAN: frozen dataclass threshold in a device compare
    probs = torch.where(cirrus[:, None], probs * 0.5, probs)  # CLEAN: where keeps the graph static
    if probs[:, 1].mean() > 0.9:  # HAZARD: dynamic-control-flow
        probs = probs * (1.0 - cfg["haze_weight"])
    print("cloud fraction", probs[:, 1].mean())  # HAZARD: host-code
    return MaskOut(probs, snow)


@torch.compile(options=CG)
def class_summary(probs: Tensor) -> Tensor:
    labels: Tensor = probs.argmax(1)
    present: Tensor = torch.unique(labels)  # HAZARD: dynamic-shape
    return present


@torch.compile(options=CG)
def shadow_project(probs: Tensor, sun_shift: int) -> Tensor:
    return torch.roll(probs[:, 1], shifts=(sun_shift, sun_shift), dims=(1, 2))


@torch.compile(mode="max-autotune-no-cudagraphs")
def debug_stats(probs: Tensor) -> Tensor:
    print("max prob", probs.max())  # CLEAN: compile without CUDA graphs
    return probs[probs > 0.5]  # CLEAN: mask indexing outside CUDA-graph compiles


def process_scene(tiles: list[Tensor], season: str) -> list[Tensor]:
    cfg["ndsi_cut"] = 0.35 if season == "winter" else 0.45
    masks: list[Tensor] = []
    with torch.no_grad():
        for tile in tiles:
            out: MaskOut = cloud_mask(tile)
            shadow: Tensor = shadow_project(out.probs, 3)
            masks.append(out.probs[:, 1] + shadow)  # HAZARD: static-address
            keep: Tensor = cloud_mask(tile).probs.clone()
            shadow = shadow_project(keep, 3)
            masks.append(keep[:, 1] + shadow)  # CLEAN: the first output was cloned before the second compiled call
    return masks


if __name__ == "__main__":
    tiles: list[Tensor] = [torch.rand(4, N_BANDS, 128, 128, device="cuda") for _ in range(6)]
    for season in ("winter", "summer"):
        print(season, len(process_scene(tiles, season)))
    print(class_summary(cloud_mask(tiles[0]).probs))
    print(debug_stats(cloud_mask(tiles[1]).probs).numel())
