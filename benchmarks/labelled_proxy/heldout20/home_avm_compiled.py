"""Mortgage origination: automated valuation model (AVM) behind the underwriting workbench.

Service classes are composed from the platform's mixins; `CompiledServingMixin` compiles
`_predict` with CUDA graphs in __init__ (migration notes: PLATFORM-2291).
"""
import logging

import torch
import torch.nn as nn

log = logging.getLogger("avm.service")
CG = {"triton.cudagraphs": True}
NO_CG = {"triton.cudagraphs": False}


class BaseService:
    def __init__(self, model: nn.Module):
        self.model = model.cuda().eval()


class FeatureMixin:
    def _prep(self, x):
        x.sub_(self.mu).div_(self.sd)  # HAZARD: static-address
        return x

    def _prep_copy(self, x):
        return (x - self.mu) / self.sd  # CLEAN: out-of-place normalisation, the caller's tensor is untouched

    def _winsorize(self, x):
        return torch.clamp(x, min=self.lo, max=self.hi)  # CLEAN: clamp with tensor bounds, out of place


class CompiledServingMixin:
    compile_options = CG

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._predict = torch.compile(self._predict, options=self.compile_options)


class AVMNet(nn.Module):
    def __init__(self, n_feat=48, hid=256):
        super().__init__()
        self.subject = nn.Sequential(nn.Linear(n_feat, hid), nn.GELU(), nn.Linear(hid, hid))
        self.comp = nn.Sequential(nn.Linear(n_feat + 2, hid), nn.GELU(), nn.Linear(hid, hid))
        self.out = nn.Linear(2 * hid, 2)  # log value, log uncertainty

    def forward(self, subj, comps):
        s = self.subject(subj)
        c = self.comp(comps).mean(0, keepdim=True).expand_as(s)
        return self.out(torch.cat([s, c], -1))


class AVMService(CompiledServingMixin, FeatureMixin, BaseService):
    def __init__(self, model, mu, sd, lo, hi):
        super().__init__(model)
        self.mu, self.sd = mu.cuda(), sd.cuda()
        self.lo, self.hi = lo.cuda(), hi.cuda()
        self.audit = []

    @torch.no_grad()
    def _predict(self, subj, comps):
        subj = self._winsorize(self._prep(subj))
        recent = comps[comps[:, -1] < 365.0]  # HAZARD: dynamic-shape
        out = self.model(subj, recent)
        log.info("valuation batch, mean log value %s", out[:, 0].mean())  # HAZARD: host-code
        return out

    def value(self, subj, comps):
        out = self._predict(subj, comps)
        self.audit.append(out)  # HAZARD: static-address
        return out[:, 0].exp()

    @torch.no_grad()
    def explain(self, subj, comps):
        base = self.model(self._prep_copy(subj), comps)
        return {"log_value": base[:, 0], "log_sigma": base[:, 1]}

    def flush_audit(self):
        batch = torch.cat(self.audit)
        self.audit.clear()
        return batch.cpu()


class AuditReplayService(AVMService):
    """Offline re-valuation for model-risk audits; no CUDA graphs needed there."""

    compile_options = NO_CG

    def value(self, subj, comps):
        return self._predict(subj, comps)[:, 0].exp()  # CLEAN: audit build compiled without CUDA graphs


def workbench(model, stats, requests):
    svc = AVMService(model, stats["mu"], stats["sd"], stats["lo"], stats["hi"])
    for req in requests:
        # every request: one subject property plus the 24 comparables from the comp-selection service
        yield svc.value(req["subject"].cuda(), req["comps"].cuda())
    log.info("audit batch size %d", len(svc.audit))
