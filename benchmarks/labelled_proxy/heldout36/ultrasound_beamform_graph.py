"""Plane-wave ultrasound delay-and-sum beamformer + despeckle net, replayed per frame."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, NamedTuple

import numpy as np
import torch
from torch import Tensor, nn

N_ELEM: Final[int] = 128
N_SAMPLES: Final[int] = 2048
N_ANGLES: Final[int] = 5
FS_HZ: Final[float] = 40e6


class Grid(NamedTuple):
    depth_px: int
    width_px: int


@dataclass(frozen=True, slots=True)
class Probe:
    pitch_m: float = 0.3e-3
    f0_hz: float = 5e6


class Despeckle(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net: nn.Sequential = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 1, 3, padding=1))

    def forward(self, img: Tensor) -> Tensor:
        return img - self.net(img)


@dataclass
class Beamformer:
    probe: Probe
    grid: Grid
    despeckle: Despeckle
    sound_speed: float = 1540.0
    rf: Tensor = field(default_factory=lambda: torch.zeros(N_ANGLES, N_ELEM, N_SAMPLES, device="cuda"))

    def __post_init__(self) -> None:
        self.apod_np: np.ndarray = np.hanning(N_ELEM).astype(np.float32)
        self.apod: Tensor = torch.from_numpy(self.apod_np).cuda()  # CLEAN: uploaded at construction, before capture
        self.post: torch.cuda.Stream = torch.cuda.Stream()
        self.graph: torch.cuda.CUDAGraph = torch.cuda.CUDAGraph()
        self.frames_mean: list[float] = []

    def _delays(self) -> Tensor:
        c: float = self.sound_speed  # HAZARD: python-scalar
        z: Tensor = torch.linspace(0.0, 0.04, self.grid.depth_px, device="cuda")
        x: Tensor = (torch.arange(N_ELEM, device="cuda") - N_ELEM / 2) * self.probe.pitch_m  # CLEAN: frozen probe pitch, constant
        dist: Tensor = torch.sqrt(z[:, None] ** 2 + x[None, :] ** 2) + z[:, None]
        return (dist / c * FS_HZ).long().clamp_(0, N_SAMPLES - 1)

    def _image(self) -> Tensor:
        idx: Tensor = self._delays()
        tgc: Tensor = torch.from_numpy(np.exp(np.linspace(0, 2, self.grid.depth_px)).astype(np.float32)).to("cuda")  # HAZARD: pinned-memory
        summed: Tensor = torch.zeros(self.grid.depth_px, device="cuda")
        for a in range(N_ANGLES):  # CLEAN: Final loop bound, unrolled identically at every capture
            gathered: Tensor = self.rf[a].gather(1, idx.T.contiguous())  # CLEAN: gather with a CUDA index tensor
            summed = summed + (gathered * self.apod[:, None]).sum(0)
        env: Tensor = (summed * tgc).abs()
        img: Tensor = self.despeckle(env.view(1, 1, -1, 1).expand(1, 1, -1, self.grid.width_px).contiguous())
        with torch.cuda.stream(self.post):  # HAZARD: stream
            log_img: Tensor = 20.0 * torch.log10(img.clamp_min(1e-6))
        self.frames_mean.append(log_img.mean().cpu().item())  # HAZARD: host-sync
        return log_img

    @torch.no_grad()
    def capture(self) -> None:
        for _ in range(3):
            self._image()
        torch.cuda.synchronize()  # CLEAN: synchronize before capture, outside the region
        self.graph.capture_begin()  # HAZARD: stream
        self.out: Tensor = self._image()
        self.graph.capture_end()

    def frame(self, rf: Tensor) -> Tensor:
        self.rf.copy_(rf)  # CLEAN: copy_ into the captured RF buffer
        self.graph.replay()
        return self.out.clone()


if __name__ == "__main__":
    bf = Beamformer(Probe(), Grid(512, 128), Despeckle().cuda().eval())
    bf.capture()
    for i in range(40):
        if i == 20:
            bf.sound_speed = 1480.0
        img: Tensor = bf.frame(torch.randn(N_ANGLES, N_ELEM, N_SAMPLES, device="cuda"))
        print(i, img.shape, float(img.amax()))  # CLEAN: host read after replay
