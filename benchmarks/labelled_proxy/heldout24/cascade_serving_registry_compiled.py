"""Two-stage model cascade for a content-tagging API.

A small distilled tagger answers every request; only low-margin items are re-scored
by the large tagger.  Models come from a registry, are compiled per stage with the
stage's mode, and are dispatched by name.
"""
import logging
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("cascade")
REGISTRY = {}


def register(name, compile_mode):
    def deco(cls):
        REGISTRY[name] = (cls, compile_mode)
        return cls
    return deco


@register("small", "reduce-overhead")
class SmallTagger(nn.Module):
    def __init__(self, d=384, n_tags=1000):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d, 1024), nn.GELU(), nn.Linear(1024, n_tags))

    def forward(self, x):
        logits = self.body(x)
        top2 = logits.topk(2, dim=-1).values
        margin = top2[:, 0] - top2[:, 1]
        log.info("small batch %d", x.shape[0])  # HAZARD: host-code
        return logits, margin


@register("large", "reduce-overhead")
class LargeTagger(nn.Module):
    def __init__(self, d=384, n_tags=1000):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, n_tags))

    def forward(self, x):
        self.t_enter = time.perf_counter()  # HAZARD: host-code
        return self.body(x)


@register("audit", "default")
class AuditHead(nn.Module):
    def forward(self, logits, margin):
        low = logits[margin < 0.1]  # CLEAN: default compile, no CUDA graphs
        print("audit", low.shape)  # CLEAN: default compile, no CUDA graphs
        return low.float().mean()


class Cascade:
    def __init__(self, margin_floor=0.5):
        self.stages = {}
        for name, (cls, mode) in REGISTRY.items():
            m = cls().cuda().eval()
            self.stages[name] = torch.compile(m) if mode == "default" else torch.compile(m, mode=mode)
        self.margin_floor = torch.tensor(margin_floor, device="cuda")

    def _run_small(self, x):
        return self.stages["small"](x)

    def _run_large(self, x):
        return self.stages["large"](x)

    def stage(self, name, *args):
        return getattr(self, f"_run_{name}")(*args)

    @torch.no_grad()
    def tag(self, x):
        logits, margin = self.stage("small", x)
        unsure = margin < self.margin_floor
        idx = unsure.nonzero().squeeze(1)  # CLEAN: eager, outside the compiled stages
        refined = self.stage("large", x[idx])  # HAZARD: dynamic-shape
        final = logits.clone()  # HAZARD: static-address
        final[idx] = refined
        return F.sigmoid(final)

    @torch.no_grad()
    def tag_padded(self, x):
        logits, margin = self.stage("small", x)
        logits, margin = logits.clone(), margin.clone()  # CLEAN: cloned before the large model runs
        refined = self.stage("large", x)
        use_large = (margin < self.margin_floor)[:, None]
        return F.sigmoid(torch.where(use_large, refined, logits))  # CLEAN: device select

    @torch.no_grad()
    def audit(self, x):
        logits, margin = self.stage("small", x)
        return self.stages["audit"](logits.clone(), margin.clone())
