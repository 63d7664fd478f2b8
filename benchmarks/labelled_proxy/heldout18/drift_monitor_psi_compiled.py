"""Feature-drift monitor sidecar of a model-serving deployment (MLOps).

For every scored batch the sidecar computes the population stability index (PSI) of
each feature against the training reference histogram. The hot path is compiled with
options={"triton.cudagraphs": True}; the reference is refreshed whenever a new model
version is promoted, and the bin count comes from the monitoring config.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("drift")
CG = {"triton.cudagraphs": True}
PAGE_LEVEL = 0.25  # PSI above this pages the on-call


class DriftMonitor(nn.Module):
    def __init__(self, ref_features: torch.Tensor, num_bins=20, threshold=0.2):
        super().__init__()
        self.num_bins = num_bins
        lo, hi = ref_features.min(0).values, ref_features.max(0).values
        self.register_buffer("lo", lo)
        self.register_buffer("hi", hi)
        self.register_buffer("ref_hist", self._histogram(ref_features, lo, hi, num_bins))
        self.register_buffer("alerts", torch.zeros(ref_features.size(1)))
        self.register_buffer("thr", torch.tensor(float(threshold)))
        self.psi = torch.compile(self._psi, options=CG)
        self.psi_offline = torch.compile(self._psi, mode="max-autotune-no-cudagraphs")

    @staticmethod
    def _histogram(x, lo, hi, bins):
        idx = ((x - lo) / (hi - lo).clamp_min(1e-9) * bins).long().clamp(0, bins - 1)
        return F.one_hot(idx, bins).float().mean(0).T.contiguous() + 1e-4

    def _psi(self, batch):
        nb = self.num_bins  # HAZARD: python-scalar
        cur = self._histogram(batch, self.lo, self.hi, nb)
        psi = ((cur - self.ref_hist) * torch.log(cur / self.ref_hist)).sum(-1)
        self.alerts.add_((psi > self.thr).float())  # CLEAN: threshold is a device buffer, refreshed with fill_
        worst = psi.max()
        if worst.item() > PAGE_LEVEL:  # HAZARD: host-sync
            log.warning("PSI drift %s on feature %s", worst, psi.argmax())  # HAZARD: host-code
        return psi

    # -- control plane ---------------------------------------------------------------
    def on_model_promoted(self, new_ref_features: torch.Tensor):
        lo, hi = new_ref_features.min(0).values, new_ref_features.max(0).values
        self.lo.copy_(lo)  # CLEAN: in-place refresh keeps the buffer address
        self.hi.copy_(hi)
        self.ref_hist = self._histogram(new_ref_features, lo, hi, self.num_bins)  # HAZARD: static-address
        self.alerts.zero_()

    def on_config_reload(self, cfg: dict):
        self.num_bins = int(cfg.get("psi_bins", self.num_bins))
        self.thr.fill_(float(cfg.get("psi_threshold", self.thr.item())))


class Sidecar:
    def __init__(self, monitor: DriftMonitor, window=4096):
        self.monitor = monitor.cuda()
        self.window = window
        self.buf = torch.zeros(window, monitor.lo.numel(), device="cuda")
        self.fill = 0

    @torch.no_grad()
    def observe(self, features: torch.Tensor):
        n = min(features.size(0), self.window - self.fill)
        self.buf[self.fill:self.fill + n].copy_(features[:n])
        self.fill += n
        if self.fill == self.window:
            psi = self.monitor.psi(self.buf).clone()  # CLEAN: fixed window size, output cloned
            self.fill = 0
            return psi.cpu()
        return None

    @torch.no_grad()
    def backfill(self, days_of_features):
        return [self.monitor.psi_offline(day.cuda()).cpu() for day in days_of_features]  # CLEAN: no-cudagraphs twin, ragged days are fine
