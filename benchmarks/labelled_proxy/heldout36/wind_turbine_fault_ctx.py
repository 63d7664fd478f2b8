"""SCADA fault scoring for a wind farm, captured through a typed context-manager helper."""
from __future__ import annotations

import contextlib
import enum
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final, Protocol

import torch
from torch import Tensor, nn

N_TURBINES: Final[int] = 48
N_SIGNALS: Final[int] = 16
ALARM_Z: Final[float] = 3.5


class Regime(enum.IntEnum):
    IDLE = 0
    PARTIAL = 1
    RATED = 2


class ResidualModel(Protocol):
    def __call__(self, x: Tensor) -> Tensor: ...


class NormalBehaviour(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mlp: nn.Sequential = nn.Sequential(nn.Linear(N_SIGNALS, 64), nn.Tanh(), nn.Linear(64, N_SIGNALS))

    def forward(self, x: Tensor) -> Tensor:
        return x - self.mlp(x)


@contextlib.contextmanager
def captured(graph: torch.cuda.CUDAGraph, *, pool: object | None = None) -> Iterator[torch.cuda.CUDAGraph]:
    with torch.cuda.graph(graph, pool=pool):  # HAZARD: api-misuse
        yield graph


@dataclass
class FarmMonitor:
    model: ResidualModel
    regime: Regime = Regime.RATED
    static_x: Tensor = field(default_factory=lambda: torch.zeros(N_TURBINES, N_SIGNALS, device="cuda"))
    gen: torch.Generator = field(default_factory=lambda: torch.Generator(device="cuda"))

    def __post_init__(self) -> None:
        self.aux: torch.cuda.Stream = torch.cuda.Stream()
        self.sigma: Tensor = torch.ones(N_SIGNALS, device="cuda")
        self.gen.manual_seed(7)  # CLEAN: seeding a generator outside any capture
        self.captured_at: float = 0.0

    def _scale(self) -> float:
        match self.regime:  # CLEAN: regime enum fixed before capture and never reassigned
            case Regime.IDLE:
                return 0.5
            case Regime.PARTIAL:
                return 0.8
            case _:
                return 1.0

    def _score(self) -> tuple[Tensor, Tensor]:
        x: Tensor = self.static_x * self._scale()
        dither: Tensor = torch.randn(x.shape, device=x.device, generator=self.gen) * 1e-3  # HAZARD: rng
        resid: Tensor = self.model(x + dither)
        z: Tensor = resid.abs() / self.sigma
        with torch.cuda.stream(self.aux):  # HAZARD: stream
            ewma: Tensor = z.mean(0) * 0.1
        self.captured_at = time.monotonic()  # HAZARD: host-code
        alarms: Tensor = (z > ALARM_Z).any(-1)  # CLEAN: Final float threshold in a device compare
        tripped: Tensor = alarms.nonzero().squeeze(-1)  # HAZARD: dynamic-shape
        jitter: Tensor = torch.rand(N_TURBINES, device=x.device)  # CLEAN: default CUDA generator is capture-safe
        return z.amax(-1) + 0.0 * jitter, tripped

    def capture(self) -> None:
        self.graph = torch.cuda.CUDAGraph()
        with captured(self.graph):
            self.out, self.tripped = self._score()

    def step(self, frame: Tensor) -> Tensor:
        self.static_x.copy_(frame)  # CLEAN: copy_ into the captured input
        self.graph.replay()
        return self.out.clone()  # CLEAN: cloned before the next replay


def main() -> None:
    monitor = FarmMonitor(NormalBehaviour().cuda().eval())
    with torch.no_grad():
        monitor.capture()
        for minute in range(60):
            frame: Tensor = torch.randn(N_TURBINES, N_SIGNALS, device="cuda")
            worst: Tensor = monitor.step(frame)
            if float(worst.max()) > ALARM_Z:  # CLEAN: host check after replay, outside the capture
                print(f"minute {minute}: alarm {worst.argmax().item()}")


if __name__ == "__main__":
    main()
