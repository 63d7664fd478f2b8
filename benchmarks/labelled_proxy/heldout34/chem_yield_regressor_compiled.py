"""Reaction-yield regressor for a high-throughput chemistry screen, served with reduce-overhead."""
import abc
import logging
import time
import torch
import torch.nn as nn

log = logging.getLogger("yield")

class ConditionsMixin:
    temperature_k = 298.0
    @property
    def arrhenius(self):
        return 298.0 / self.temperature_k  # HAZARD: python-scalar
    @property
    def n_solvents(self):
        return 4  # CLEAN: constant property, never changes

class AuditMixin:
    def audit(self, y):
        log.debug("plate mean yield %s", y.mean())  # HAZARD: host-code
        return y

class YieldBase(nn.Module, abc.ABC):
    def __init__(self, d):
        super().__init__()
        self.solvent = nn.Embedding(4, d)
        self.mlp = nn.Sequential(nn.Linear(2 * d, d), nn.SiLU(), nn.Linear(d, 1))
    @abc.abstractmethod
    def featurize(self, fp):
        ...
    def forward(self, fp, solvent_id):
        sid = solvent_id.clamp(0, self.n_solvents - 1)
        h = torch.cat([self.featurize(fp), self.solvent(sid)], -1)
        return torch.sigmoid(self.mlp(h)).squeeze(-1)

class FingerprintYield(ConditionsMixin, AuditMixin, YieldBase):
    def __init__(self, d):
        super().__init__(d)
        self.fp_proj = nn.Linear(2048, d)
        self.register_buffer("fp_scale", torch.ones(2048))
    @staticmethod
    def _density_norm(fp):
        return fp / fp.sum(-1, keepdim=True).clamp_min(1.0)
    def featurize(self, fp):
        return self.fp_proj(self._density_norm(fp) * self.fp_scale) * self.arrhenius
    def forward(self, fp, solvent_id):
        y = super().forward(fp, solvent_id)
        return self.audit(self._guard(y))
    def _guard(self, y):
        if torch.isnan(y).any():  # HAZARD: dynamic-control-flow
            y = torch.zeros_like(y)
        return y

class SafeFingerprintYield(FingerprintYield):
    def _guard(self, y):
        return torch.where(torch.isnan(y), torch.zeros_like(y), y)  # CLEAN: three-argument where, no branch
    def audit(self, y):
        return y

class ScreenServer:
    PLATE = 96
    def __init__(self, model):
        self.model = model.cuda().eval()
        self.fast = torch.compile(self.model, mode="reduce-overhead")
        self.review = torch.compile(self.model, mode="max-autotune-no-cudagraphs")
    @torch.no_grad()
    def score_plate(self, fp, sid):
        t0 = time.perf_counter()
        y = self.fast(fp, sid).clone()  # CLEAN: fixed 96-well plate shape, output cloned
        log.info("plate scored in %.1f ms", 1e3 * (time.perf_counter() - t0))  # CLEAN: logging outside the compiled call
        return y
    @torch.no_grad()
    def score_campaign(self, reactions):
        out = []
        for fp, sid in reactions:
            out.append(self.fast(fp, sid).clone())  # HAZARD: dynamic-shape
        return torch.cat(out)
    @torch.no_grad()
    def review_outliers(self, fp, sid):
        return self.review(fp, sid)  # CLEAN: no-cudagraphs build, any batch size
    def set_temperature(self, kelvin):
        self.model.temperature_k = kelvin

def run_screen(campaign, plates, temperatures):
    server = ScreenServer(FingerprintYield(128))
    results = []
    for kelvin, (fp, sid) in zip(temperatures, plates):
        server.set_temperature(kelvin)
        results.append(server.score_plate(fp.cuda(), sid.cuda()))
    ragged = [(fp.cuda(), sid.cuda()) for fp, sid in campaign]
    return results, server.score_campaign(ragged)
