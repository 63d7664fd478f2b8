"""12-lead ECG arrhythmia classifier whose captured training step fires typed callbacks."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Protocol, runtime_checkable

import torch
from torch import Tensor, nn

N_LEADS: Final[int] = 12
N_SAMPLES: Final[int] = 2500
N_CLASSES: Final[int] = 9
BATCH: Final[int] = 64


@runtime_checkable
class StepCallback(Protocol):
    def on_logits(self, logits: Tensor, target: Tensor) -> None: ...


@dataclass(slots=True)
class DeviceAccuracy:
    correct: Tensor = field(default_factory=lambda: torch.zeros((), device="cuda"))

    def on_logits(self, logits: Tensor, target: Tensor) -> None:
        self.correct.add_((logits.argmax(-1) == target).sum())  # CLEAN: device-side accumulation, replayed each step


@dataclass(slots=True)
class AfibAlarm:
    threshold: float = 0.8
    alarms: list[float] = field(default_factory=list)

    def on_logits(self, logits: Tensor, target: Tensor) -> None:
        p_af: float = logits.softmax(-1)[:, 1].max().item()  # HAZARD: host-sync
        if p_af > self.threshold:  # CLEAN: Python float compared to a Python float
            self.alarms.append(p_af)


@dataclass(slots=True)
class StepCounter:
    n: int = 0

    def on_logits(self, logits: Tensor, target: Tensor) -> None:
        self.n += 1  # HAZARD: host-code


class Mirror:
    __slots__ = ("stream", "copy")

    def __init__(self) -> None:
        self.stream: torch.cuda.Stream = torch.cuda.Stream()
        self.copy: Tensor = torch.zeros(BATCH, N_CLASSES, device="cuda")

    def on_logits(self, logits: Tensor, target: Tensor) -> None:
        with torch.cuda.stream(self.stream):  # HAZARD: stream
            self.copy.copy_(logits.detach())


class Resnet1d(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body: nn.Sequential = nn.Sequential(nn.Conv1d(N_LEADS, 64, 15, 2, 7), nn.BatchNorm1d(64), nn.ReLU(),
                                                 nn.Conv1d(64, 128, 9, 2, 4), nn.BatchNorm1d(128), nn.ReLU(), nn.AdaptiveAvgPool1d(1))
        self.fc: nn.Linear = nn.Linear(128, N_CLASSES)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.body(x).flatten(1))


class LeadDropout:
    def __init__(self) -> None:
        self.gen: torch.Generator = torch.Generator(device="cuda")

    def __call__(self, x: Tensor) -> Tensor:
        keep: Tensor = torch.rand(x.shape[0], N_LEADS, 1, device=x.device, generator=self.gen) > 0.1  # HAZARD: rng
        return x * keep


class GraphedTrainer:
    def __init__(self, callbacks: list[StepCallback]) -> None:
        self.net: Resnet1d = Resnet1d().cuda()
        self.opt: torch.optim.Adam = torch.optim.Adam(self.net.parameters(), lr=1e-3, capturable=True)
        self.augment: LeadDropout = LeadDropout()
        self.callbacks: list[StepCallback] = [cb for cb in callbacks if isinstance(cb, StepCallback)]  # CLEAN: runtime Protocol check on the host, before capture
        self.x: Tensor = torch.zeros(BATCH, N_LEADS, N_SAMPLES, device="cuda")
        self.y: Tensor = torch.zeros(BATCH, dtype=torch.long, device="cuda")
        self.graph: torch.cuda.CUDAGraph = torch.cuda.CUDAGraph()

    def _step(self) -> Tensor:
        self.opt.zero_grad(set_to_none=False)
        noise: Tensor = torch.randn_like(self.x) * 0.01  # CLEAN: default CUDA generator
        logits: Tensor = self.net(self.augment(self.x) + noise)
        loss: Tensor = nn.functional.cross_entropy(logits, self.y)
        loss.backward()
        self.opt.step()  # CLEAN: capturable Adam
        for cb in self.callbacks:
            cb.on_logits(logits, self.y)
        return loss.detach()

    def capture(self) -> None:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph):
            self.loss: Tensor = self._step()

    def train(self, data: list[tuple[Tensor, Tensor]]) -> None:
        for x, y in data:
            self.x.copy_(x)
            self.y.copy_(y)  # CLEAN: copy_ into the static labels
            self.graph.replay()


if __name__ == "__main__":
    acc = DeviceAccuracy()
    trainer = GraphedTrainer([acc, AfibAlarm(), StepCounter(), Mirror()])
    trainer.capture()
    trainer.train([(torch.randn(BATCH, N_LEADS, N_SAMPLES, device="cuda"), torch.randint(0, N_CLASSES, (BATCH,), device="cuda")) for _ in range(30)])
    print(acc.correct.item() / (30 * BATCH))
