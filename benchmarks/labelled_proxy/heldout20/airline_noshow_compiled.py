"""Airline revenue management: passenger no-show model feeding the overbooking limits.

Scorers are plugins registered with their compile options; the RM pipeline loader builds
them from config (backend="cudagraphs") and dispatches inventory messages by type.
"""
import numpy as np
import torch
import torch.nn as nn

SCORERS = {}


def register_scorer(name, **compile_kw):
    def deco(cls):
        SCORERS[name] = (cls, compile_kw)
        return cls
    return deco


class NoShowNet(nn.Module):
    def __init__(self, n_feat=32, hid=128):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(n_feat + 1, hid), nn.ReLU(), nn.Linear(hid, 1))

    def forward(self, pax, days_out):
        return torch.sigmoid(self.mlp(torch.cat([pax, days_out], -1))).squeeze(-1)


@register_scorer("noshow_v4", backend="cudagraphs")
class NoShowScorer:
    def __init__(self, net, stress_dropout=0.05):
        self.net = net.cuda().eval()
        self.stress_dropout = stress_dropout  # shadow-mode robustness probe requested by model risk
        self.booking_window_days = 330

    def __call__(self, pax):
        if np.random.rand() < self.stress_dropout:  # HAZARD: host-code
            pax = pax * (torch.rand_like(pax) > 0.1)
        horizon = self.booking_window_days  # HAZARD: python-scalar
        p = self.net(pax, pax[:, :1] * horizon)
        p = torch.where(pax[:, 1] > 0, torch.zeros_like(p), p)  # CLEAN: staff/positive-space flag masked on the device
        shows = (1 - p).sum()
        overbook = max(0, int(pax.shape[0] - shows.item()))  # HAZARD: host-sync
        return p, overbook


class PipelineLoader:
    def __init__(self, cfg: dict):
        cls, kw = SCORERS[cfg["scorer"]]
        self.scorer = cls(NoShowNet())
        self.score = torch.compile(self.scorer, **kw)
        self.qa_score = torch.compile(self.scorer)

    def on_message(self, msg):
        return getattr(self, f"on_{msg['type']}")(msg)

    @torch.no_grad()
    def on_flight_snapshot(self, msg):
        # one flight per message: the cabin's current bookings (1..400 passengers)
        return self.score(msg["pax"].cuda())  # HAZARD: dynamic-shape

    @torch.no_grad()
    def on_network_block(self, msg):
        # nightly network run: the feeder always sends full 512-passenger blocks
        return self.score(msg["pax"].cuda())  # CLEAN: fixed 512-row blocks, one graph

    @torch.no_grad()
    def on_qa_sample(self, msg):
        return self.qa_score(msg["pax"].cuda())  # CLEAN: default compile (no CUDA graphs) for QA samples

    def on_window_change(self, msg):
        # schedule changes open new departures further out
        self.scorer.booking_window_days = int(msg["days"])


def run(cfg, bus):
    loader = PipelineLoader(cfg)
    for msg in bus:
        out = loader.on_message(msg)
        if out is not None:
            p, overbook = out
            yield p.clone(), overbook
