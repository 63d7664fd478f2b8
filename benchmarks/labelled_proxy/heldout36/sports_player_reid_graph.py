"""Broadcast football player re-identification: crop embeddings replayed from CUDA graphs."""
from __future__ import annotations

from functools import cached_property
from typing import Final, Protocol

import torch
from torch import Tensor, nn

CROP_H: Final[int] = 128
CROP_W: Final[int] = 64
EMB: Final[int] = 256
BUCKETS: Final[tuple[int, ...]] = (8, 22, 44)


class Embedder(Protocol):
    def __call__(self, crops: Tensor) -> Tensor: ...


class OsNetLite(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem: nn.Sequential = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU())
        self.fc: nn.Linear = nn.Linear(64, EMB)

    def forward(self, crops: Tensor) -> Tensor:
        return self.fc(self.stem(crops).mean((2, 3)))


class ReidRunner:
    __slots__ = ("embed", "backbone", "jerseys", "team_lut", "graphs", "static_in", "static_out", "pool", "__dict__")

    def __init__(self, backbone: nn.Module, *, compile_backbone: bool = True) -> None:
        self.backbone: nn.Module = backbone
        self.embed: Embedder = backbone
        self.jerseys: list[int] = [7, 10, 23]
        self.team_lut: Tensor = torch.randn(100, EMB, device="cuda")
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.static_in: dict[int, Tensor] = {}
        self.static_out: dict[int, Tensor] = {}
        self.pool = torch.cuda.graph_pool_handle()
        self._compile: bool = compile_backbone

    @cached_property
    def pitch_prior(self) -> Tensor:
        return torch.linspace(0.9, 1.1, EMB, device="cuda")

    def _norm_stats(self) -> tuple[Tensor, Tensor]:
        mean: Tensor = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
        std: Tensor = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
        return mean.to("cuda", non_blocking=True), std.to("cuda", non_blocking=True)  # HAZARD: pinned-memory

    def _forward(self, crops: Tensor, ids: Tensor) -> Tensor:
        mean, std = self._norm_stats()
        e: Tensor = self.embed((crops - mean) / std)  # HAZARD: api-misuse
        e = e * self.pitch_prior  # CLEAN: cached_property tensor, first built during warm-up, same buffer at capture
        team: Tensor = self.team_lut[ids]  # CLEAN: gather with a CUDA index tensor
        star: Tensor = self.team_lut[self.jerseys].mean(0)  # HAZARD: host-sync
        return nn.functional.normalize(e + 0.1 * team + 0.01 * star, dim=-1)

    @torch.autocast("cuda", dtype=torch.float16)  # HAZARD: autocast-cache
    def _capture(self, b: int, crops: Tensor, ids: Tensor) -> None:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool):
            self.static_out[b] = self._forward(crops, ids)
        self.graphs[b] = g

    @torch.no_grad()
    def build(self) -> None:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        for b in BUCKETS:
            crops: Tensor = torch.zeros(b, 3, CROP_H, CROP_W, device="cuda")
            ids: Tensor = torch.zeros(b, dtype=torch.long, device="cuda")
            with torch.cuda.stream(side):
                for _ in range(3):
                    self._forward(crops, ids)
            torch.cuda.current_stream().wait_stream(side)
            if self._compile:
                self.embed = torch.compile(self.backbone)
            self._capture(b, crops, ids)
            self.static_in[b] = crops

    def run(self, crops: Tensor) -> Tensor:
        b: int = next(k for k in BUCKETS if k >= crops.shape[0])
        self.static_in[b][: crops.shape[0]].copy_(crops)  # CLEAN: copy_ into the captured input
        self.graphs[b].replay()
        return self.static_out[b][: crops.shape[0]]


def track_match(runner: ReidRunner, frames: int) -> list[Tensor]:
    gallery: list[Tensor] = []
    for _ in range(frames):
        n: int = 20
        emb: Tensor = runner.run(torch.rand(n, 3, CROP_H, CROP_W, device="cuda"))
        gallery.append(emb)  # HAZARD: static-address
        sims: Tensor = emb @ torch.cat(gallery).T
        print(sims.max(1).values.mean().item())  # CLEAN: host read between replays, outside the capture
    return gallery


if __name__ == "__main__":
    r = ReidRunner(OsNetLite().cuda().eval())
    r.build()
    track_match(r, frames=30)
