"""Antibody-antigen affinity regressor: torch-graphed CDR embedder + TE-graphed FP8 trunk."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Final, TypedDict

import torch
import transformer_engine.pytorch as te
from torch import Tensor, nn
from transformer_engine.common.recipe import DelayedScaling, Format

SEQ: Final[int] = 128
BATCH: Final[int] = 16
HIDDEN: Final[int] = 512
N_LAYERS: Final[int] = 4
VOCAB: Final[int] = 25


class TrunkKwargs(TypedDict):
    hidden_dropout: float
    attention_dropout: float


@dataclass(frozen=True, slots=True)
class TrunkSpec:
    heads: int = 8
    ffn: int = 2048


class CdrEmbedder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok: nn.Embedding = nn.Embedding(VOCAB, HIDDEN)
        self.gen: torch.Generator = torch.Generator(device="cuda")
        self.mask_rate: float = 0.15

    def forward(self, onehot: Tensor) -> Tensor:
        h: Tensor = onehot @ self.tok.weight
        keep: Tensor = torch.rand(h.shape[:2], device=h.device, generator=self.gen)  # HAZARD: rng
        rate: float = self.mask_rate  # HAZARD: python-scalar
        h = h * (keep > rate).unsqueeze(-1)
        return h.transpose(0, 1).contiguous()


class LayerTimer:
    __slots__ = ("calls",)

    def __init__(self) -> None:
        self.calls: int = 0

    def __call__(self, mod: nn.Module, args: tuple[Tensor, ...]) -> None:
        self.calls += 1


spec: TrunkSpec = TrunkSpec()
kw: TrunkKwargs = {"hidden_dropout": 0.0, "attention_dropout": 0.0}
embedder: CdrEmbedder = CdrEmbedder().cuda()
layers: list[te.TransformerLayer] = [te.TransformerLayer(HIDDEN, spec.ffn, spec.heads, **kw).cuda() for _ in range(N_LAYERS)]
head: nn.Linear = nn.Linear(HIDDEN, 1).cuda()
recipe: DelayedScaling = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16)

timer: LayerTimer = LayerTimer()
for layer in layers:
    layer.register_forward_pre_hook(timer)  # HAZARD: api-misuse

onehot0: Tensor = torch.zeros(BATCH, SEQ, VOCAB, device="cuda")
g_embed = torch.cuda.make_graphed_callables(embedder, (onehot0,))  # CLEAN: torch graphs the embedder on its own, no hooks on it
samples: tuple[tuple[Tensor], ...] = tuple((torch.randn(SEQ, BATCH, HIDDEN, device="cuda", requires_grad=True),) for _ in layers)
with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
    g_layers = te.make_graphed_callables(tuple(layers), samples, enabled=True, recipe=recipe, cache_quantized_params=True)

opt: torch.optim.AdamW = torch.optim.AdamW([p for m in (embedder, head, *layers) for p in m.parameters()], lr=1e-4)


def trunk(h: Tensor, *, first: bool) -> Tensor:
    for g in g_layers:
        h = g(h, is_first_microbatch=first)  # CLEAN: flag passed on every training replay
    return h


for step in range(300):
    onehot: Tensor = nn.functional.one_hot(torch.randint(0, VOCAB, (BATCH, SEQ), device="cuda"), VOCAB).float()
    kd: Tensor = torch.randn(BATCH, device="cuda")
    embedder.mask_rate = 0.15 * (1.0 - step / 300)
    for micro in range(2):
        with te.autocast(enabled=True, recipe=recipe):  # CLEAN: replays inside te.autocast with the graphing recipe
            h: Tensor = trunk(g_embed(onehot), first=(micro == 0))
        pred: Tensor = head(h.mean(0)).squeeze(-1)
        loss: Tensor = nn.functional.mse_loss(pred, kd)
        loss.backward()
    opt.step()  # CLEAN: eager AdamW outside every graph
    opt.zero_grad(set_to_none=True)
    if step % 50 == 0:
        print(step, round(loss.item(), 4), timer.calls)  # CLEAN: host read after the step, outside capture

with torch.no_grad(), te.autocast(enabled=True, recipe=recipe):
    probe: Tensor = g_embed(torch.zeros(BATCH, SEQ, VOCAB, device="cuda"))
    for g in g_layers:
        probe = g(probe)  # HAZARD: api-misuse
print(head(probe.mean(0)).squeeze(-1).cpu())
