"""Adaptive traffic-signal controller: Q-policy inference captured with capture_begin/capture_end."""
from __future__ import annotations

import enum
import random
from collections import deque
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

import torch
from torch import Tensor, nn

T = TypeVar("T")
N_INTERSECTIONS: Final[int] = 32
OBS_DIM: Final[int] = 20
N_PHASES: Final[int] = 4


class Corridor(enum.Enum):
    ARTERIAL = enum.auto()
    GRID = enum.auto()


class Ring(Generic[T]):
    __slots__ = ("_items",)

    def __init__(self, maxlen: int) -> None:
        self._items: deque[T] = deque(maxlen=maxlen)

    def push(self, item: T) -> None:
        self._items.append(item)

    def __len__(self) -> int:
        return len(self._items)


@dataclass(frozen=True, slots=True)
class SignalSpec:
    corridor: Corridor
    min_green_s: int = 8


class QNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body: nn.Sequential = nn.Sequential(nn.Linear(OBS_DIM, 128), nn.ReLU(), nn.Linear(128, N_PHASES))

    def forward(self, obs: Tensor) -> Tensor:
        return self.body(obs)


class SignalController:
    def __init__(self, net: QNet, spec: SignalSpec) -> None:
        self.net: QNet = net
        self.spec: SignalSpec = spec
        self.epsilon: float = 1.0
        self.phase_order: list[int] = [0, 2, 1, 3]
        self.static_obs: Tensor = torch.zeros(N_INTERSECTIONS, OBS_DIM, device="cuda")
        self.graph: torch.cuda.CUDAGraph = torch.cuda.CUDAGraph()
        self.side: torch.cuda.Stream = torch.cuda.Stream()

    def _act(self) -> Tensor:
        q: Tensor = self.net(self.static_obs)
        match self.spec.corridor:  # CLEAN: frozen corridor enum, same value at capture and replay
            case Corridor.ARTERIAL:
                q = q[:, torch.arange(N_PHASES, device=q.device).flip(0)]  # CLEAN: device index tensor
            case Corridor.GRID:
                pass
        order: Tensor = torch.tensor(self.phase_order, device=q.device)  # HAZARD: host-sync
        q = q.index_select(1, order)
        if q.abs().max() > 1e4:  # HAZARD: dynamic-control-flow
            q = q / 1e4
        eps: float = self.epsilon  # HAZARD: python-scalar
        explore: bool = random.random() < 0.05  # HAZARD: host-code
        probs: Tensor = torch.softmax(q, -1) * (1 - eps) + eps / N_PHASES
        sampled: Tensor = torch.multinomial(probs, 1).squeeze(-1)  # CLEAN: multinomial on the default generator is capturable
        greedy: Tensor = q.argmax(-1)  # CLEAN: argmax stays on the device
        return sampled if explore else greedy

    @torch.no_grad()
    def capture(self) -> None:
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):  # CLEAN: capture_begin on a forked side stream after warm-up
            for _ in range(3):
                self._act()
            self.graph.capture_begin()
            self.actions: Tensor = self._act()
            self.graph.capture_end()
        torch.cuda.current_stream().wait_stream(self.side)

    def act(self, obs: Tensor) -> Tensor:
        self.static_obs = obs.contiguous()  # HAZARD: static-address
        self.graph.replay()
        return self.actions.clone()


def simulate(ctrl: SignalController, episodes: int) -> None:
    buffer: Ring[tuple[Tensor, Tensor]] = Ring(10_000)
    for ep in range(episodes):
        ctrl.epsilon = max(0.05, 1.0 - ep / 50)
        for _ in range(ctrl.spec.min_green_s * 10):
            obs: Tensor = torch.randn(N_INTERSECTIONS, OBS_DIM, device="cuda")
            actions: Tensor = ctrl.act(obs)
            buffer.push((obs, actions))
        print(ep, len(buffer), actions.bincount(minlength=N_PHASES).tolist())  # CLEAN: host read between replays


if __name__ == "__main__":
    controller = SignalController(QNet().cuda().eval(), SignalSpec(Corridor.GRID))
    controller.capture()
    simulate(controller, episodes=60)
