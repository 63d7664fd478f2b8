"""Network-flow intrusion detector (NetFlow features) with options={"triton.cudagraphs": True}."""
from __future__ import annotations

import abc
import enum
import logging
from dataclasses import dataclass
from typing import ClassVar, Final, NamedTuple

import torch
from torch import Tensor, nn

log: logging.Logger = logging.getLogger("ids")
N_FLOW_FEATS: Final[int] = 32
N_PORTS: Final[int] = 1024
ATTACKS: Final[tuple[str, ...]] = ("benign", "dos", "portscan", "bruteforce", "exfil")


class Action(enum.Enum):
    ALLOW = 0
    RATE_LIMIT = 1
    BLOCK = 2


class Verdict(NamedTuple):
    probs: Tensor
    suspicious_ports: Tensor


@dataclass(frozen=True, slots=True)
class Policy:
    action: Action = Action.RATE_LIMIT
    block_at: float = 0.97


class FlowScorer(nn.Module, abc.ABC):
    n_out: ClassVar[int] = len(ATTACKS)

    def __init__(self) -> None:
        super().__init__()
        self.mlp: nn.Sequential = nn.Sequential(nn.Linear(N_FLOW_FEATS, 128), nn.ReLU(), nn.Linear(128, self.n_out))  # CLEAN: ClassVar int from a Final tuple

    @abc.abstractmethod
    def normalise(self, x: Tensor) -> Tensor: ...

    def forward(self, x: Tensor) -> Tensor:
        return self.mlp(self.normalise(x)).softmax(-1)


class LogScaledScorer(FlowScorer):
    def normalise(self, x: Tensor) -> Tensor:
        return x.log1p_()  # HAZARD: static-address


class ClampedScorer(FlowScorer):
    def normalise(self, x: Tensor) -> Tensor:
        return x.clamp(0, 1e6).log1p()  # CLEAN: out-of-place normalisation, the input is not mutated


policy: Policy = Policy()
scorer: FlowScorer = LogScaledScorer().cuda().eval()
clamped: FlowScorer = ClampedScorer().cuda().eval()
port_emb: Tensor = torch.randn(N_PORTS, device="cuda")


@torch.compile(options={"triton.cudagraphs": True})
def inspect(flows: Tensor, ports: Tensor) -> Verdict:
    probs: Tensor = scorer(flows)
    if probs[:, 0].min() < 0.01:  # HAZARD: dynamic-control-flow
        probs = probs.clamp_min(1e-4)
    attack_rate: Tensor = 1.0 - probs[:, 0].mean()
    log.warning("attack rate %s", attack_rate)  # HAZARD: host-code
    hot: Tensor = (probs[:, 1:].amax(-1) > policy.block_at).nonzero().squeeze(-1)  # HAZARD: dynamic-shape
    match policy.action:  # CLEAN: frozen policy enum, one compiled variant
        case Action.BLOCK:
            probs = probs.pow(0.5)
        case Action.RATE_LIMIT | Action.ALLOW:
            probs = probs * 1.0
    port_risk: Tensor = port_emb[ports.clamp(0, N_PORTS - 1)]  # CLEAN: gather with a CUDA index tensor
    top_ports: list[int] = ports[port_risk.topk(4).indices].tolist()  # HAZARD: host-sync
    return Verdict(probs, torch.as_tensor(top_ports, device="cuda") + 0 * hot.sum())


@torch.compile(options={"triton.cudagraphs": True})
def inspect_padded(flows: Tensor) -> Tensor:
    safe: Tensor = torch.where(torch.isfinite(flows), flows, torch.zeros_like(flows))  # CLEAN: where on a device mask
    return clamped(safe)


def monitor(windows: list[tuple[Tensor, Tensor]]) -> None:
    with torch.no_grad():
        for flows, ports in windows:
            v: Verdict = inspect(flows, ports)
            worst: str = ATTACKS[int(v.probs.mean(0).argmax())]  # CLEAN: host read after the compiled call, nothing compiled ran since
            print(worst, v.suspicious_ports.shape)


if __name__ == "__main__":
    win: list[tuple[Tensor, Tensor]] = [(torch.rand(4096, N_FLOW_FEATS, device="cuda") * 1e4,
                                         torch.randint(0, 65535, (4096,), device="cuda")) for _ in range(8)]
    monitor(win)
    print(inspect_padded(torch.rand(4096, N_FLOW_FEATS, device="cuda")).shape)
