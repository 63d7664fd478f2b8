"""Regional influenza-like-illness nowcaster (SEIR-informed MLP) trained with reduce-overhead."""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final, NamedTuple, Protocol

import torch
from torch import Tensor, nn

N_REGIONS: Final[int] = 52
WEEKS_IN: Final[int] = 12
HORIZON: Final[int] = 4


class Target(enum.Enum):
    INCIDENCE = "ili"
    HOSPITAL = "hosp"


class Forecast(NamedTuple):
    mean: Tensor
    log_scale: Tensor


class Schedule(Protocol):
    def lr_at(self, epoch: int) -> float: ...


@dataclass(frozen=True, slots=True)
class CosineSchedule:
    base: float = 2e-3
    epochs: int = 40

    def lr_at(self, epoch: int) -> float:
        import math
        return self.base * 0.5 * (1 + math.cos(math.pi * epoch / self.epochs))


class SeirMlp(nn.Module):
    def __init__(self, target: Target) -> None:
        super().__init__()
        self.target: Target = target
        self.net: nn.Sequential = nn.Sequential(nn.Linear(WEEKS_IN, 128), nn.GELU(), nn.Linear(128, 2 * HORIZON))
        self.r0: nn.Parameter = nn.Parameter(torch.tensor(1.3))

    def forward(self, hist: Tensor) -> Forecast:
        out: Tensor = self.net(hist.log1p())
        growth: Tensor = self.r0 ** torch.arange(1, HORIZON + 1, device=hist.device)  # CLEAN: Final horizon, device arange
        match self.target:  # CLEAN: target enum fixed at construction
            case Target.INCIDENCE:
                mean: Tensor = out[..., :HORIZON].exp() * growth
            case Target.HOSPITAL:
                mean = out[..., :HORIZON].exp() * growth * 0.02
        return Forecast(mean, out[..., HORIZON:])


model: SeirMlp = SeirMlp(Target.INCIDENCE).cuda()
lr_t: Tensor = torch.tensor(2e-3, device="cuda")
opt: torch.optim.Adam = torch.optim.Adam(model.parameters(), lr=2e-3, betas=(0.9, 0.999), capturable=True)
opt_r0: torch.optim.Adam = torch.optim.Adam([model.r0], lr=lr_t, capturable=True)


@torch.compile(mode="reduce-overhead")
def nll(hist: Tensor, future: Tensor) -> Tensor:
    fc: Forecast = model(hist)
    loss: Tensor = (torch.log1p(future) - torch.log1p(fc.mean)).abs().div(fc.log_scale.exp()).add(fc.log_scale).mean()
    if model.r0 > 3.0:  # HAZARD: dynamic-control-flow
        loss = loss + (model.r0 - 3.0) ** 2
    return loss


@torch.compile(mode="reduce-overhead")
def step_all() -> None:
    opt.step()
    opt_r0.step()


@torch.compile(mode="reduce-overhead")
def forecast(hist: Tensor) -> Tensor:
    fc: Forecast = model(hist)
    peak_week: int = int(fc.mean.sum(0).argmax())  # HAZARD: host-sync
    return fc.mean * (1.0 + 0.05 * peak_week)


def train(schedule: Schedule, seasons: list[tuple[Tensor, Tensor]]) -> None:
    for epoch in range(40):
        for hist, future in seasons:
            opt.zero_grad(set_to_none=False)
            opt_r0.zero_grad(set_to_none=False)
            loss: Tensor = nll(hist, future)
            loss.backward()
            step_all()
        for group in opt.param_groups:
            group["lr"] = schedule.lr_at(epoch)  # HAZARD: optimizer
            if epoch == 20:
                group["betas"] = (0.8, 0.99)  # HAZARD: optimizer
        lr_t.fill_(schedule.lr_at(epoch) * 0.1)  # CLEAN: tensor LR written in place
        print(epoch, loss.item())  # CLEAN: eager read after the compiled step


def serve(regions_hist: list[Tensor]) -> list[Tensor]:
    outs: list[Tensor] = []
    with torch.no_grad():
        for hist in regions_hist:
            outs.append(forecast(hist).clone())  # HAZARD: dynamic-shape
    return outs


if __name__ == "__main__":
    seasons = [(torch.rand(N_REGIONS, WEEKS_IN, device="cuda") * 100, torch.rand(N_REGIONS, HORIZON, device="cuda") * 100) for _ in range(10)]
    train(CosineSchedule(), seasons)
    subsets: list[Tensor] = [torch.rand(n, WEEKS_IN, device="cuda") * 100 for n in (52, 10, 7, 31)]
    print([f.shape for f in serve(subsets)])
