"""Markdown-pricing demand model: the whole training step captured in one CUDA graph."""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

import numpy as np
import torch
from torch import Tensor, nn

N_SKU_FEATS: Final[int] = 40
BATCH: Final[int] = 2048
WARMUP_ITERS: Final[int] = 3


class OptKind(enum.Enum):
    ADAMW_CAPTURABLE = enum.auto()
    ADAM_PLAIN = enum.auto()


def make_optimizer(params: list[nn.Parameter], kind: OptKind, *, lr: float) -> torch.optim.Optimizer:
    match kind:
        case OptKind.ADAMW_CAPTURABLE:
            return torch.optim.AdamW(params, lr=lr, capturable=True)
        case OptKind.ADAM_PLAIN:
            return torch.optim.Adam(params, lr=lr)


@dataclass(frozen=True, slots=True)
class Augment:
    price_jitter: float = 0.03
    seed: int = 1234

    def __call__(self, x: Tensor) -> Tensor:
        torch.cuda.manual_seed(self.seed)  # HAZARD: rng
        return x * (1.0 + self.price_jitter * torch.randn_like(x))


class DemandNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body: nn.Sequential = nn.Sequential(nn.Linear(N_SKU_FEATS, 256), nn.ReLU(), nn.Dropout(0.1), nn.Linear(256, 1))
        self.elasticity: nn.Linear = nn.Linear(N_SKU_FEATS, 1)

    def forward(self, x: Tensor, log_price: Tensor) -> Tensor:
        return self.body(x).squeeze(-1) - self.elasticity(x).squeeze(-1).exp() * log_price


class StepGraph:
    def __init__(self, net: DemandNet, augment: Augment) -> None:
        self.net: DemandNet = net
        self.augment: Augment = augment
        self.opt_body = make_optimizer(list(net.body.parameters()), OptKind.ADAMW_CAPTURABLE, lr=1e-3)
        self.opt_elast = make_optimizer(list(net.elasticity.parameters()), OptKind.ADAM_PLAIN, lr=1e-3)
        self.x: Tensor = torch.zeros(BATCH, N_SKU_FEATS, device="cuda")
        self.log_price: Tensor = torch.zeros(BATCH, device="cuda")
        self.units: Tensor = torch.zeros(BATCH, device="cuda")
        self.steps_seen: Tensor = torch.zeros((), device="cuda")
        self.graph: torch.cuda.CUDAGraph = torch.cuda.CUDAGraph()

    def _step(self) -> Tensor:
        x: Tensor = self.augment(self.x)
        shock: float = float(np.random.uniform(0.95, 1.05))  # HAZARD: host-code
        pred: Tensor = self.net(x, self.log_price * shock)
        loss: Tensor = nn.functional.poisson_nll_loss(pred, self.units, log_input=True)
        if loss > 10.0:  # HAZARD: dynamic-control-flow
            loss = loss * 0.1
        loss.backward()
        nn.utils.clip_grad_norm_(self.net.parameters(), 1.0)  # CLEAN: no error_if_nonfinite, capturable
        self.opt_body.step()  # CLEAN: capturable AdamW from the factory
        self.opt_elast.step()  # HAZARD: optimizer
        self.steps_seen.add_(1)  # CLEAN: device-side counter, replayed every time
        return loss.detach()

    def capture(self) -> None:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # CLEAN: warm-up on a forked side stream
            for _ in range(WARMUP_ITERS):
                self.opt_body.zero_grad(set_to_none=True)
                self.opt_elast.zero_grad(set_to_none=True)
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        self.opt_body.zero_grad(set_to_none=True)
        self.opt_elast.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            self.loss: Tensor = self._step()

    def train(self, batches: list[tuple[Tensor, Tensor, Tensor]]) -> list[float]:
        history: list[float] = []
        for i, (x, lp, u) in enumerate(batches):
            self.x.copy_(x)  # CLEAN: copy_ into the static inputs
            self.log_price.copy_(lp)
            self.units.copy_(u)
            self.graph.replay()
            history.append(self.loss.item())  # CLEAN: host read after replay, outside the capture
            if i == len(batches) // 2:
                for group in self.opt_body.param_groups:
                    group["lr"] = 3e-4  # HAZARD: optimizer
        return history


if __name__ == "__main__":
    step = StepGraph(DemandNet().cuda(), Augment())
    step.capture()
    data = [(torch.randn(BATCH, N_SKU_FEATS, device="cuda"), torch.randn(BATCH, device="cuda"),
             torch.poisson(torch.full((BATCH,), 3.0, device="cuda"))) for _ in range(100)]
    print(step.train(data)[-5:])
