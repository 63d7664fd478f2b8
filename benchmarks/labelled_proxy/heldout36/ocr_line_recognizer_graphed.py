"""Handwritten text-line OCR (conv encoder + CTC-free attention head) with graphed modules."""
from __future__ import annotations

import abc
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, ClassVar, Final

import torch
from torch import Tensor, nn

LINE_H: Final[int] = 32
LINE_W: Final[int] = 256
BATCH: Final[int] = 24


@dataclass(frozen=True)
class Charset:
    symbols: str

    @cached_property
    def size(self) -> int:  # computed once on the host
        return len(self.symbols) + 1


class Stage(nn.Module, abc.ABC):
    name: ClassVar[str] = "stage"

    @abc.abstractmethod
    def forward(self, x: Tensor) -> Tensor: ...


class LineEncoder(Stage):
    name = "encoder"

    def __init__(self) -> None:
        super().__init__()
        self.conv: nn.Sequential = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d((2, 2)),
                                                 nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d((1, 64)))

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(x).squeeze(2).transpose(1, 2)


class CharHead(Stage):
    name = "head"
    MAX_COLS: ClassVar[int] = 64

    def __init__(self, n_classes: int) -> None:
        super().__init__()
        self.proj: nn.Linear = nn.Linear(64, n_classes)
        self.blank_bias: float = 0.0

    def forward(self, feats: Tensor) -> Tensor:
        logits: Tensor = self.proj(feats[:, : self.MAX_COLS])  # CLEAN: ClassVar int slice bound, constant
        bias: float = self.blank_bias  # HAZARD: python-scalar
        logits[..., 0] += bias
        ink: Tensor = feats.abs().mean(-1)
        empty: Tensor = ink < 1e-3
        logits = torch.where(empty[..., None], logits.detach() * 0.0, logits)  # CLEAN: where on a device mask
        widths: list[int] = (~empty).sum(1).tolist()  # HAZARD: host-sync
        self.last_widths: list[int] = widths
        return logits


class ActivationProbe:
    __slots__ = ("means",)

    def __init__(self) -> None:
        self.means: list[float] = []

    def __call__(self, mod: nn.Module, args: tuple[Tensor, ...], out: Tensor) -> None:
        self.means.append(out.detach().float().mean())


charset: Charset = Charset("abcdefghijklmnopqrstuvwxyz0123456789 .,'-")
encoder: LineEncoder = LineEncoder().cuda()
head: CharHead = CharHead(charset.size).cuda()  # CLEAN: cached_property host int, read before graphing
probe: ActivationProbe = ActivationProbe()
encoder.register_forward_hook(probe)  # HAZARD: api-misuse

x0: Tensor = torch.randn(BATCH, 1, LINE_H, LINE_W, device="cuda")
f0: Tensor = torch.randn(BATCH, 64, 64, device="cuda", requires_grad=True)
with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
    g_encoder, g_head = torch.cuda.make_graphed_callables((encoder, head), ((x0,), (f0,)))

late_probe: ActivationProbe = ActivationProbe()
head.register_forward_hook(late_probe)  # CLEAN: hook added after graphing is allowed

opt: torch.optim.AdamW = torch.optim.AdamW([*encoder.parameters(), *head.parameters()], lr=2e-4)
loss_fn: Callable[[Tensor, Tensor], Tensor] = nn.CrossEntropyLoss()

for step in range(200):
    images: Tensor = torch.randn(BATCH, 1, LINE_H, LINE_W, device="cuda")
    targets: Tensor = torch.randint(0, charset.size, (BATCH, 64), device="cuda")
    head.blank_bias = -2.0 + step / 100.0
    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: cache-free autocast around replays
        feats: Tensor = g_encoder(images)
        logits: Tensor = g_head(feats=feats) if step % 50 == 0 else g_head(feats)  # HAZARD: api-misuse
        loss: Tensor = loss_fn(logits.float().flatten(0, 1), targets.flatten())
    loss.backward()
    opt.step()  # CLEAN: eager optimizer, not captured
    opt.zero_grad(set_to_none=True)
    if step % 20 == 0:
        print(f"step {step} loss {loss.item():.3f}")  # CLEAN: host read after the graphed backward, outside capture
