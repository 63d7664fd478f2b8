"""Online handwriting synthesis (pen-stroke mixture density head) with torch graphed callables."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final, Literal, TypedDict

import torch
from torch import Tensor, nn

WINDOW: Final[int] = 64
N_MIX: Final[int] = 20
BATCH: Final[int] = 32
D_MODEL: Final[int] = 192


class StyleTable(TypedDict):
    slant: list[float]
    pressure: list[float]


@dataclass(frozen=True, slots=True)
class SynthSpec:
    precision: Literal["fp32", "bf16"] = "bf16"
    bias: float = 0.5


class StrokeEncoder(nn.Module):
    def __init__(self, styles: StyleTable) -> None:
        super().__init__()
        self.styles: StyleTable = styles
        self.inp: nn.Linear = nn.Linear(3, D_MODEL)
        self.mix: nn.Conv1d = nn.Conv1d(D_MODEL, D_MODEL, 5, padding=2)
        self.style_ids: list[int] = [0, 3, 5]

    def forward(self, strokes: Tensor) -> Tensor:
        h: Tensor = self.inp(strokes)
        slant: Tensor = torch.tensor(self.styles["slant"]).to("cuda")  # HAZARD: pinned-memory
        chosen: Tensor = torch.tensor(self.style_ids, device="cuda")  # HAZARD: host-sync
        h = h + slant[chosen].mean() * 0.01
        h = h + torch.relu(self.mix(h.transpose(1, 2))).transpose(1, 2)
        if h.isnan().any():  # HAZARD: dynamic-control-flow
            h = torch.nan_to_num(h)
        return h


class MdnHead(nn.Module):
    def __init__(self, spec: SynthSpec) -> None:
        super().__init__()
        self.spec: SynthSpec = spec
        self.out: nn.Linear = nn.Linear(D_MODEL, 6 * N_MIX + 1)
        self.gen: torch.Generator = torch.Generator(device="cuda")

    def forward(self, h: Tensor) -> Tensor:
        params: Tensor = self.out(h)
        logits: Tensor = params[..., :N_MIX] * (1.0 + self.spec.bias)  # CLEAN: frozen spec bias, constant after graphing
        pen_noise: Tensor = torch.rand(params.shape[:2], device=params.device, generator=self.gen)  # HAZARD: rng
        wobble: Tensor = torch.randn_like(logits) * 0.01  # CLEAN: default CUDA generator is capture-safe
        flip: bool = random.random() < 0.1  # HAZARD: host-code
        eos: Tensor = torch.sigmoid(params[..., -1:]) + (pen_noise[..., None] * 0.01 if flip else 0.0)
        pi: Tensor = torch.where(logits > 20.0, logits.detach() * 0 + 20.0, logits)  # CLEAN: where keeps shapes static
        return torch.cat([pi + wobble, params[..., N_MIX:-1], eos], -1)


styles: StyleTable = {"slant": [0.0, 0.1, -0.1, 0.2, 0.05, -0.15], "pressure": [1.0] * 6}
spec: SynthSpec = SynthSpec()
encoder: StrokeEncoder = StrokeEncoder(styles).cuda()
head: MdnHead = MdnHead(spec).cuda()
s0: Tensor = torch.randn(BATCH, WINDOW, 3, device="cuda")
h0: Tensor = torch.randn(BATCH, WINDOW, D_MODEL, device="cuda", requires_grad=True)
g_encoder, g_head = torch.cuda.make_graphed_callables((encoder, head), ((s0,), (h0,)))  # CLEAN: no autocast around graphing, no hooks yet
head.register_forward_hook(lambda m, a, o: None)  # CLEAN: hook added after graphing
opt: torch.optim.Adam = torch.optim.Adam([*encoder.parameters(), *head.parameters()], lr=1e-4)


def mdn_nll(params: Tensor, target: Tensor) -> Tensor:
    pi: Tensor = params[..., :N_MIX].log_softmax(-1)
    mu: Tensor = params[..., N_MIX : 3 * N_MIX].view(*params.shape[:2], N_MIX, 2)
    d2: Tensor = ((target[..., None, :2] - mu) ** 2).sum(-1)
    return -(torch.logsumexp(pi - 0.5 * d2, -1)).mean()


for step in range(500):
    strokes: Tensor = torch.randn(BATCH, WINDOW + 1, 3, device="cuda")
    use_bf16: bool = spec.precision == "bf16"  # CLEAN: Literal-typed str compared on the host
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_bf16, cache_enabled=False):  # CLEAN: cache-free autocast around replays
        params: Tensor = g_head(g_encoder(strokes[:, :-1].contiguous()))
    loss: Tensor = mdn_nll(params.float(), strokes[:, 1:])
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if step % 100 == 0:
        print(step, loss.item())  # CLEAN: host read outside every graph
