"""Accelerated underwriting: discrete-time mortality-risk model (life insurance), nightly retrain.

Model parts are built by name from the actuarial team's model spec; the encoder and the
hazard head are graphed with torch.cuda.make_graphed_callables for the training loop.
"""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

REGISTRY = {}


def component(name):
    def deco(cls):
        REGISTRY[name] = cls
        return cls
    return deco


@dataclass
class ModelSpec:
    encoder: str = "tabular_resmlp"
    head: str = "discrete_hazard"
    n_features: int = 96
    hidden: int = 256
    n_intervals: int = 20
    feature_noise: float = 0.02
    clip_value: float = 8.0


@component("tabular_resmlp")
class TabularEncoder(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.spec = spec
        self.inp = nn.Linear(spec.n_features, spec.hidden)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(spec.hidden), nn.Linear(spec.hidden, spec.hidden), nn.GELU()) for _ in range(3))
        self.noise_gen = torch.Generator(device="cuda")
        self.noise_gen.manual_seed(7)

    def forward(self, x):
        if x.abs().max() > self.spec.clip_value:  # HAZARD: dynamic-control-flow
            x = x.clamp(-self.spec.clip_value, self.spec.clip_value)
        if self.training:
            x = x + self.spec.feature_noise * torch.randn(x.shape, device=x.device, generator=self.noise_gen)  # HAZARD: rng
        h = self.inp(x)
        for blk in self.blocks:
            h = h + blk(h)
        return h


@component("discrete_hazard")
class DiscreteHazardHead(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.fc = nn.Linear(spec.hidden, spec.n_intervals)
        self.calibration_shrink = 0.0  # shrink towards 0.5 during the first epochs on a new cohort

    def forward(self, h):
        eps = self.calibration_shrink  # HAZARD: python-scalar
        return torch.sigmoid(self.fc(h)) * (1 - eps) + 0.5 * eps


def survival_nll(hazard, event_interval, observed):
    t = torch.arange(hazard.shape[1], device=hazard.device)
    at_risk = (t.unsqueeze(0) <= event_interval.unsqueeze(1)).float()
    died = F.one_hot(event_interval, hazard.shape[1]).float() * observed.unsqueeze(1)
    ll = died * torch.log(hazard + 1e-7) + (at_risk - died) * torch.log1p(-hazard + 1e-7)
    return -(ll * at_risk).sum(1).mean()


class RetrainJob:
    def __init__(self, spec: ModelSpec, batch=4096):
        self.enc = REGISTRY[spec.encoder](spec).cuda()
        self.head = REGISTRY[spec.head](spec).cuda()
        x = torch.randn(batch, spec.n_features, device="cuda")
        h = torch.randn(batch, spec.hidden, device="cuda", requires_grad=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            self.g_enc, self.g_head = torch.cuda.make_graphed_callables((self.enc, self.head), ((x,), (h,)))
        self.mean_hazard = []
        self.head.register_forward_hook(self._watch)  # CLEAN: hook registered after graphing
        params = list(self.enc.parameters()) + list(self.head.parameters())
        self.opt = torch.optim.AdamW(params, lr=2e-4, weight_decay=1e-4)

    def _watch(self, module, inp, out):
        self.mean_hazard.append(out.detach().float().mean())

    def set_cohort_epoch(self, epoch: int):
        self.head.calibration_shrink = max(0.0, 0.2 - 0.05 * epoch)

    def fit(self, loader, epochs=6):
        # loader yields fixed 4096-row batches (drop_last=True), matching the graphed shapes
        for epoch in range(epochs):
            self.set_cohort_epoch(epoch)
            for x, t_event, observed in loader:
                hazard = self.g_head(self.g_enc(x))  # CLEAN: graphed callables called positionally, in capture order
                loss = survival_nll(hazard.float(), t_event, observed)
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                self.opt.step()
            print(f"epoch {epoch}: nll={loss.item():.4f}")  # CLEAN: eager loss read, outside the graphs
        return self.enc, self.head
