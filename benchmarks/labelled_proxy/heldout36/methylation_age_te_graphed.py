"""Epigenetic-clock regressor on CpG methylation windows: torch-graphed CpG stem + TE-graphed trunk."""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Final

import torch
import transformer_engine.pytorch as te
from torch import Tensor, nn
from transformer_engine.common.recipe import DelayedScaling, Format

N_CPG: Final[int] = 256
N_TOKENS: Final[int] = 64
HIDDEN: Final[int] = 384
BATCH: Final[int] = 32


class Plugin(abc.ABC):
    @abc.abstractmethod
    def attach(self, layers: list[nn.Module]) -> None: ...


class ActivationNorms(Plugin):
    def __init__(self) -> None:
        self.norms: list[Tensor] = []

    def attach(self, layers: list[nn.Module]) -> None:
        for layer in layers:
            layer.register_forward_hook(lambda m, a, o: self.norms.append(o.detach().norm()))  # HAZARD: api-misuse


class ParamCounter(Plugin):
    def __init__(self) -> None:
        self.count: int = 0

    def attach(self, layers: list[nn.Module]) -> None:
        self.count = sum(p.numel() for layer in layers for p in layer.parameters())  # CLEAN: counts parameters, registers nothing


class CpgStem(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj: nn.Linear = nn.Linear(N_CPG // N_TOKENS * 2, HIDDEN)
        self.missing_gen: torch.Generator = torch.Generator(device="cuda")
        self.coverage_floor: float = 5.0

    def forward(self, beta: Tensor, depth: Tensor) -> Tensor:
        floor: float = self.coverage_floor  # HAZARD: python-scalar
        w: Tensor = (depth / floor).clamp(max=1.0)
        drop: Tensor = torch.rand(beta.shape, device=beta.device, generator=self.missing_gen) < 0.05  # HAZARD: rng
        beta = torch.where(drop, torch.full_like(beta, 0.5), beta)  # CLEAN: where with a device mask
        tok: Tensor = torch.stack([beta, w], -1).view(beta.shape[0], N_TOKENS, -1)
        return self.proj(tok).transpose(0, 1).contiguous()


@dataclass
class ClockModel:
    plugins: list[Plugin] = field(default_factory=list)
    recipe: DelayedScaling = field(default_factory=lambda: DelayedScaling(fp8_format=Format.HYBRID))

    def __post_init__(self) -> None:
        self.stem: CpgStem = CpgStem().cuda()
        self.layers: list[te.TransformerLayer] = [te.TransformerLayer(HIDDEN, 4 * HIDDEN, 6, hidden_dropout=0.0, attention_dropout=0.0).cuda() for _ in range(3)]
        self.head: nn.Linear = nn.Linear(HIDDEN, 1).cuda()

    @torch.autocast("cuda", dtype=torch.bfloat16)  # HAZARD: autocast-cache
    def _graph_trunk(self) -> tuple[nn.Module, ...]:
        samples = tuple((torch.randn(N_TOKENS, BATCH, HIDDEN, device="cuda", requires_grad=True),) for _ in self.layers)
        return te.make_graphed_callables(tuple(self.layers), samples, enabled=True, recipe=self.recipe)

    def build(self) -> None:
        for plugin in self.plugins:
            plugin.attach(self.layers)
        b0, d0 = torch.rand(BATCH, N_CPG, device="cuda"), torch.rand(BATCH, N_CPG, device="cuda") * 30
        self.g_stem = torch.cuda.make_graphed_callables(self.stem, (b0, d0))  # CLEAN: stem graphed by torch, positional sample args, no hooks
        self.g_layers = self._graph_trunk()

    def __call__(self, beta: Tensor, depth: Tensor) -> Tensor:
        h: Tensor = self.g_stem(beta, depth)  # CLEAN: positional call of the graphed stem
        with te.autocast(enabled=True, recipe=self.recipe):  # CLEAN: replay inside te.autocast with the graphing recipe
            for g in self.g_layers:
                h = g(h)
        return self.head(h.mean(0)).squeeze(-1)


clock = ClockModel(plugins=[ParamCounter(), ActivationNorms()])
clock.build()
params = [*clock.stem.parameters(), *clock.head.parameters(), *(p for l in clock.layers for p in l.parameters())]
opt: torch.optim.AdamW = torch.optim.AdamW(params, lr=1e-4)
for step in range(400):
    beta, depth = torch.rand(BATCH, N_CPG, device="cuda"), torch.rand(BATCH, N_CPG, device="cuda") * 30
    age: Tensor = torch.rand(BATCH, device="cuda") * 90
    clock.stem.coverage_floor = 5.0 + step / 100
    loss: Tensor = nn.functional.l1_loss(clock(beta, depth), age)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if step % 100 == 0:
        print(step, loss.item())  # CLEAN: host read outside every graph
