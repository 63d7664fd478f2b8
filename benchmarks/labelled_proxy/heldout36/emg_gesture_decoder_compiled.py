"""Surface-EMG hand-gesture decoder for a prosthesis controller (max-autotune forward)."""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final, NamedTuple, overload

import torch
from torch import Tensor, nn

N_CH: Final[int] = 8
WIN: Final[int] = 200
N_GESTURES: Final[int] = 10


class Hand(enum.Enum):
    LEFT = "L"
    RIGHT = "R"


@dataclass(slots=True)
class Calibration:
    gain: float = 1.0
    deadzone: float = 0.05


class Decision(NamedTuple):
    logits: Tensor
    rest_prob: Tensor


@overload
def rectify(x: Tensor) -> Tensor: ...
@overload
def rectify(x: float) -> float: ...
def rectify(x: Tensor | float) -> Tensor | float:
    return x.abs() if isinstance(x, Tensor) else abs(x)


class GestureNet(nn.Module):
    def __init__(self, calib: Calibration, hand: Hand) -> None:
        super().__init__()
        self.calib: Calibration = calib
        self.hand: Hand = hand
        self.temporal: nn.Conv1d = nn.Conv1d(N_CH, 32, kernel_size=9, padding=4)
        self.cls: nn.Linear = nn.Linear(32, N_GESTURES)

    def forward(self, x: Tensor) -> Decision:
        x.sub_(x.mean(-1, keepdim=True))  # HAZARD: static-address
        env: Tensor = rectify(x)  # CLEAN: overload dispatch on a tensor, plain elementwise op
        gain: float = self.calib.gain  # HAZARD: python-scalar
        env = env * gain
        match self.hand:  # CLEAN: hand fixed at construction, constant enum
            case Hand.LEFT:
                env = env.flip(1)
            case Hand.RIGHT:
                pass
        h: Tensor = torch.relu(self.temporal(env)).mean(-1)
        logits: Tensor = self.cls(h)
        peak: float = logits.max().item()  # HAZARD: host-sync
        logits = logits - peak
        rest: Tensor = torch.where(env.mean((1, 2)) < self.calib.deadzone, 1.0, 0.0)  # CLEAN: deadzone never changes, where stays on device
        return Decision(logits, rest)


calib: Calibration = Calibration()
model: GestureNet = GestureNet(calib, Hand.RIGHT).cuda().eval()
model.forward = torch.compile(model.forward, mode="max-autotune")


@torch.compile
def fit_gain(x: Tensor) -> float:
    return 1.0 / max(x.abs().mean().item(), 1e-6)  # CLEAN: default torch.compile, no CUDA graphs


def session(stream: list[Tensor]) -> list[Decision]:
    history: list[Decision] = []
    with torch.no_grad():
        for window in stream:
            dec: Decision = model(window)
            history.append(dec)  # HAZARD: static-address
    return history


def session_safe(stream: list[Tensor]) -> list[Tensor]:
    kept: list[Tensor] = []
    with torch.no_grad():
        for window in stream:
            dec = model(window.clone())
            kept.append(dec.logits.clone())  # CLEAN: cloned before the next call
    return kept


def variable_windows(n: int) -> list[Tensor]:
    return [torch.randn(1, N_CH, WIN + 13 * (i % 5), device="cuda") for i in range(n)]


if __name__ == "__main__":
    rest: Tensor = torch.randn(1, N_CH, WIN, device="cuda")
    calib.gain = fit_gain(rest)
    fixed: list[Tensor] = [torch.randn(1, N_CH, WIN, device="cuda") for _ in range(20)]
    print(len(session(fixed)), len(session_safe(fixed)))
    with torch.no_grad():
        for w in variable_windows(10):
            print(model(w).logits.argmax(-1).tolist())  # HAZARD: dynamic-shape
