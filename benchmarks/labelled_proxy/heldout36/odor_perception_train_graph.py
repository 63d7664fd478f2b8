"""Molecular odor-descriptor predictor (fingerprint MLP, multi-label) with a captured training step."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, NotRequired, TypedDict

import torch
from torch import Tensor, nn

N_BITS: Final[int] = 2048
N_ODORS: Final[int] = 138
BATCH: Final[int] = 512


class AdamKw(TypedDict):
    lr: float
    weight_decay: float
    capturable: NotRequired[bool]


@dataclass(frozen=True, slots=True)
class DropSpec:
    bit_drop: float = 0.1
    label_smooth: float = 0.02


class OdorNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.trunk: nn.Sequential = nn.Sequential(nn.Linear(N_BITS, 512), nn.SiLU(), nn.Linear(512, 256), nn.SiLU())
        self.head: nn.Linear = nn.Linear(256, N_ODORS)

    def forward(self, fp: Tensor) -> Tensor:
        return self.head(self.trunk(fp))


@dataclass
class CapturedTrainer:
    net: OdorNet
    drop: DropSpec
    trunk_kw: AdamKw = field(default_factory=lambda: AdamKw(lr=1e-3, weight_decay=1e-5, capturable=True))
    head_kw: AdamKw = field(default_factory=lambda: AdamKw(lr=3e-3, weight_decay=0.0))

    def __post_init__(self) -> None:
        self.opt_trunk = torch.optim.AdamW(self.net.trunk.parameters(), **self.trunk_kw)
        self.opt_head = torch.optim.AdamW(self.net.head.parameters(), **self.head_kw)
        self.fp: Tensor = torch.zeros(BATCH, N_BITS, device="cuda")
        self.y: Tensor = torch.zeros(BATCH, N_ODORS, device="cuda")
        self.graph: torch.cuda.CUDAGraph = torch.cuda.CUDAGraph()
        self.bit_gen: torch.Generator = torch.Generator(device="cuda")
        self.mix_gen: torch.Generator = torch.Generator(device="cuda")
        self.graph.register_generator_state(self.bit_gen)
        self.metrics: torch.cuda.Stream = torch.cuda.Stream()
        self.auc_proxy: Tensor = torch.zeros((), device="cuda")

    def _step(self) -> Tensor:
        keep: Tensor = torch.rand(self.fp.shape, device="cuda", generator=self.bit_gen) > self.drop.bit_drop  # CLEAN: generator registered with the graph
        lam: Tensor = torch.rand((), device="cuda", generator=self.mix_gen)  # HAZARD: rng
        fp: Tensor = self.fp * keep
        fp = lam * fp + (1 - lam) * fp.roll(1, 0)
        y: Tensor = self.y * (1 - self.drop.label_smooth) + self.drop.label_smooth / 2  # CLEAN: frozen spec, constant after capture
        logits: Tensor = self.net(fp)
        loss: Tensor = nn.functional.binary_cross_entropy_with_logits(logits, y)
        loss.backward()
        self.opt_trunk.step()  # CLEAN: capturable AdamW
        self.opt_head.step()  # HAZARD: optimizer
        with torch.cuda.stream(self.metrics):  # HAZARD: stream
            self.auc_proxy.copy_((logits.sigmoid().round() == self.y).float().mean())
        return loss.detach()

    def capture(self) -> None:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._step()
                self.net.zero_grad(set_to_none=True)
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph):
            self.loss: Tensor = self._step()

    def fit(self, loader: list[tuple[Tensor, Tensor]]) -> list[float]:
        losses: list[float] = []
        for i, (fp, y) in enumerate(loader):
            self.fp.copy_(fp)  # CLEAN: copy_ into the static input
            if i % 10 == 0:
                self.y = y.clone()  # HAZARD: static-address
            else:
                self.y.copy_(y)
            self.graph.replay()
            if torch.isfinite(self.loss).item():  # CLEAN: host read after replay, outside the capture
                losses.append(self.loss.item())
        return losses


if __name__ == "__main__":
    trainer = CapturedTrainer(OdorNet().cuda(), DropSpec())
    trainer.capture()
    loader = [((torch.rand(BATCH, N_BITS, device="cuda") < 0.05).float(), (torch.rand(BATCH, N_ODORS, device="cuda") < 0.1).float()) for _ in range(50)]
    print(trainer.fit(loader)[-3:])
