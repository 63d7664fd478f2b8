"""Motor-insurance claim severity model (Tweedie GLM-net) trained with reduce-overhead."""
from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import Final, NamedTuple, Protocol

import torch
from torch import Tensor, nn

log: logging.Logger = logging.getLogger("severity")
N_RATING: Final[int] = 24
EPOCHS: Final[int] = 6


class Link(enum.Enum):
    LOG = enum.auto()
    SOFTPLUS = enum.auto()


@dataclass(frozen=True, slots=True)
class NetSpec:
    hidden: int = 96
    link: Link = Link.LOG


@dataclass(slots=True)
class LossState:
    tweedie_power: float = 1.5
    exposure_floor: float = 0.05


class Batch(NamedTuple):
    x: Tensor
    claims: Tensor
    exposure: Tensor


class Scorer(Protocol):
    def __call__(self, x: Tensor) -> Tensor: ...


class SeverityNet(nn.Module):
    def __init__(self, spec: NetSpec) -> None:
        super().__init__()
        self.spec: NetSpec = spec
        self.body: nn.Sequential = nn.Sequential(nn.Linear(N_RATING, spec.hidden), nn.SiLU(), nn.Linear(spec.hidden, 1))

    def forward(self, x: Tensor) -> Tensor:
        eta: Tensor = self.body(x).squeeze(-1)
        match self.spec.link:  # CLEAN: link chosen in a frozen spec, constant for every call
            case Link.LOG:
                return eta.exp()
            case Link.SOFTPLUS:
                return nn.functional.softplus(eta)


net: SeverityNet = SeverityNet(NetSpec()).cuda()
lr_t: Tensor = torch.tensor(3e-3, device="cuda")
opt: torch.optim.Adam = torch.optim.Adam(net.parameters(), lr=lr_t, capturable=True)
state: LossState = LossState()


@torch.compile(mode="reduce-overhead")
def tweedie_loss(batch: Batch) -> Tensor:
    mu: Tensor = net(batch.x)
    p: float = state.tweedie_power  # HAZARD: python-scalar
    expo: Tensor = batch.exposure.clamp_min(state.exposure_floor)  # CLEAN: floor never changes after start-up
    dev: Tensor = -batch.claims * mu.pow(1 - p) / (1 - p) + mu.pow(2 - p) / (2 - p)
    loss: Tensor = (dev * expo).mean()
    if torch.isnan(loss):  # HAZARD: dynamic-control-flow
        loss = torch.zeros_like(loss)
    log.info("tweedie loss %s", loss)  # HAZARD: host-code
    return loss


@torch.compile(mode="reduce-overhead")
def opt_step() -> None:
    opt.step()


@torch.compile(mode="max-autotune-no-cudagraphs")
def audit(x: Tensor, threshold: float) -> Tensor:
    mu: Tensor = net(x)
    big: Tensor = mu[mu > threshold]  # CLEAN: mask indexing under a compile without CUDA graphs
    log.debug("large claims %s", big.numel())  # CLEAN: no CUDA graphs in this compile mode
    return big


def make_batch(n: int) -> Batch:
    return Batch(torch.randn(n, N_RATING, device="cuda"), torch.rand(n, device="cuda") * 4, torch.rand(n, device="cuda"))


def train(scorer: Scorer) -> None:
    for epoch in range(EPOCHS):
        state.tweedie_power = 1.2 + 0.1 * epoch
        for _ in range(50):
            batch: Batch = make_batch(512)
            opt.zero_grad(set_to_none=False)
            loss: Tensor = tweedie_loss(batch)
            value: float = loss.item()  # CLEAN: read in eager code before backward, outside the compiled function
            loss.backward()
            opt_step()
        lr_t.fill_(3e-3 * 0.7 ** epoch)  # CLEAN: tensor LR updated in place, no recompile
        for group in opt.param_groups:
            group["weight_decay"] = 1e-4 * (epoch + 1)  # HAZARD: optimizer
        log.info("epoch %d loss %.4f", epoch, value)  # CLEAN: eager logging between compiled calls


@torch.compile(mode="reduce-overhead")
def predict(x: Tensor) -> Tensor:
    return net(x)


def score_portfolio(policies: list[Tensor]) -> list[float]:
    totals: list[float] = []
    with torch.no_grad():
        for block in policies:
            mu: Tensor = predict(block)  # HAZARD: dynamic-shape
            totals.append(float(mu.sum()))  # CLEAN: host read of a reduced value outside the compiled function
    return totals


if __name__ == "__main__":
    train(net)
    sizes: tuple[int, ...] = (311, 77, 1024, 530)
    print(score_portfolio([torch.randn(s, N_RATING, device="cuda") for s in sizes]))
    print(audit(torch.randn(64, N_RATING, device="cuda"), threshold=3.0))
