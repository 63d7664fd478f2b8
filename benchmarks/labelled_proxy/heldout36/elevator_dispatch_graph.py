"""Elevator group dispatch: learned hall-call assignment scored in a captured graph."""
from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from typing import Final, Protocol

import torch
from torch import Tensor, nn

N_CARS: Final[int] = 8
N_FLOORS: Final[int] = 40
MAX_CALLS: Final[int] = 64


class TrafficMode(enum.Enum):
    UP_PEAK = enum.auto()
    DOWN_PEAK = enum.auto()
    INTERFLOOR = enum.auto()


class CostModel(Protocol):
    def __call__(self, feats: Tensor) -> Tensor: ...


class WaitTimeNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mlp: nn.Sequential = nn.Sequential(nn.Linear(6, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, feats: Tensor) -> Tensor:
        return self.mlp(feats).squeeze(-1)


@dataclass(frozen=True, slots=True)
class BuildingSpec:
    lobby_floor: int = 0
    express_zone: tuple[int, int] = (20, 39)


class Dispatcher:
    __slots__ = ("cost", "spec", "mode", "car_pos", "car_load", "calls", "graph", "assign", "decided_at")

    def __init__(self, cost: CostModel, spec: BuildingSpec, mode: TrafficMode) -> None:
        self.cost: CostModel = cost
        self.spec: BuildingSpec = spec
        self.mode: TrafficMode = mode
        self.car_pos: Tensor = torch.zeros(N_CARS, device="cuda")
        self.car_load: Tensor = torch.zeros(N_CARS, device="cuda")
        self.calls: Tensor = torch.zeros(MAX_CALLS, 2, device="cuda")
        self.graph: torch.cuda.CUDAGraph = torch.cuda.CUDAGraph()
        self.decided_at: float = 0.0

    def _assign(self) -> Tensor:
        dist: Tensor = (self.calls[:, None, 0] - self.car_pos[None, :]).abs()
        lo, hi = self.spec.express_zone  # CLEAN: frozen tuple of ints, constant
        in_express: Tensor = (self.calls[:, 0] >= lo) & (self.calls[:, 0] <= hi)
        feats: Tensor = torch.stack([dist, self.car_load.expand_as(dist), self.calls[:, None, 1].expand_as(dist),
                                     in_express[:, None].float().expand_as(dist), dist.new_zeros(dist.shape), dist.new_ones(dist.shape)], -1)
        match self.mode:  # CLEAN: mode enum set at construction and never reassigned
            case TrafficMode.UP_PEAK:
                feats[..., 4] = (self.calls[:, None, 0] == self.spec.lobby_floor).float()
            case TrafficMode.DOWN_PEAK | TrafficMode.INTERFLOOR:
                pass
        wait: Tensor = self.cost(feats)
        if (self.car_load > 0.95).all():  # HAZARD: dynamic-control-flow
            wait = wait + 100.0
        overloaded: Tensor = self.car_load > 0.9
        wait = wait.masked_fill(overloaded[None, :], 1e4)  # CLEAN: masked_fill with a device mask
        self.decided_at = time.perf_counter()  # HAZARD: host-code
        n_pending: int = int((self.calls[:, 1] > 0).sum())  # HAZARD: host-sync
        return wait[:max(n_pending, 1)].argmin(-1)

    @torch.no_grad()
    def capture(self) -> None:
        for _ in range(3):
            self._assign()
        self.graph.capture_begin()  # HAZARD: stream
        self.assign: Tensor = self._assign()
        self.graph.capture_end()

    def tick(self, car_pos: Tensor, car_load: Tensor, calls: Tensor) -> Tensor:
        self.car_pos.copy_(car_pos)  # CLEAN: copy_ into the captured input
        self.car_load = car_load  # HAZARD: static-address
        self.calls.copy_(calls)
        self.graph.replay()
        return self.assign.clone()  # CLEAN: cloned before the next replay


if __name__ == "__main__":
    d = Dispatcher(WaitTimeNet().cuda().eval(), BuildingSpec(), TrafficMode.UP_PEAK)
    d.capture()
    for second in range(300):
        calls: Tensor = torch.stack([torch.randint(0, N_FLOORS, (MAX_CALLS,), device="cuda").float(),
                                     (torch.rand(MAX_CALLS, device="cuda") < 0.3).float()], -1)
        cars: Tensor = d.tick(torch.rand(N_CARS, device="cuda") * N_FLOORS, torch.rand(N_CARS, device="cuda"), calls)
        if second % 60 == 0:
            print(second, cars.tolist())  # CLEAN: host read after replay
