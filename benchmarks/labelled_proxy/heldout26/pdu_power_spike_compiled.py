"""Rack-PDU power telemetry: per-outlet spike and brown-out detection in a data-center hall.

A collector polls 480 PDUs over SNMP every second and publishes (outlet x 60 s) windows on
an internal bus; the detector scores every outlet against an EWMA baseline and a small
forecasting net, and pages the on-call electrician when an outlet crosses the threshold.
The scoring function is compiled with options={"triton.cudagraphs": True}. The on-call
engineer can tighten the threshold from a chat command during an incident.
"""
import logging
import queue
import threading

import torch
import torch.nn as nn

log = logging.getLogger("pdu")
OUTLETS, WIN = 480 * 24, 60
CG = {"triton.cudagraphs": True}


class OutletForecaster(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(WIN, 128), nn.GELU(), nn.Linear(128, 1))
        self.register_buffer("ewma", torch.zeros(OUTLETS))
        self.register_buffer("ewvar", torch.ones(OUTLETS))
        self.sigma_threshold = 6.0

    def forward(self, watts):
        watts.sub_(self.ewma[:, None])  # HAZARD: static-address
        pred = self.net(watts).squeeze(-1)
        resid = watts[:, -1] - pred
        z = resid / self.ewvar.sqrt()
        self.ewma.mul_(0.99).add_(0.01 * (watts[:, -1] + self.ewma))  # CLEAN: in-place update of a registered buffer
        self.ewvar.mul_(0.99).add_(0.01 * resid.pow(2))
        thr = self.sigma_threshold  # HAZARD: python-scalar
        hot = z > thr
        spikes = z[hot]  # HAZARD: dynamic-shape
        log.info("scored window, threshold %.1f", thr)  # HAZARD: host-code
        flagged = torch.where(hot, z, torch.zeros_like(z))  # CLEAN: fixed-shape device-side select
        return flagged, spikes


class Detector:
    def __init__(self, dev="cuda"):
        self.model = OutletForecaster().to(dev).eval()
        self.score = torch.compile(self.model, options=CG)
        self.dev = dev

    @torch.no_grad()
    def on_window(self, window_cpu):
        watts = window_cpu.to(self.dev, non_blocking=True)
        flagged, _ = self.score(watts)
        flagged = flagged.clone()  # CLEAN: cloned right after the call
        idx = flagged.nonzero().squeeze(-1)  # CLEAN: eager, on the cloned output, outside the compiled code
        return idx.cpu().tolist(), flagged[idx].cpu().tolist()

    def on_chat(self, cmd):
        if cmd.startswith("!threshold "):
            self.model.sigma_threshold = float(cmd.split()[1])


def backfill(model, archive, dev="cuda"):
    slow = torch.compile(model, mode="max-autotune-no-cudagraphs")
    hits = []
    with torch.no_grad():
        for day in archive:
            flagged, spikes = slow(day.to(dev))  # CLEAN: no CUDA graphs in this mode
            hits.append(spikes.cpu())
    return hits


def run(bus, pager):
    det = Detector()
    q = queue.Queue(maxsize=2)
    threading.Thread(target=lambda: [q.put(w) for w in bus.windows()], daemon=True).start()
    threading.Thread(target=lambda: [det.on_chat(c) for c in bus.chat()], daemon=True).start()
    while True:
        outlets, z = det.on_window(q.get())
        if outlets:
            log.warning("paging for %d outlets", len(outlets))  # CLEAN: eager logging outside the compiled forward
            pager.page(outlets, z)
