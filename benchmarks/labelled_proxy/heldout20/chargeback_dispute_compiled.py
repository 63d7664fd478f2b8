"""Payments risk: chargeback dispute-outcome model (probability that the merchant wins the
representment, and the expected net recovery), served by the disputes platform.

Models are built from a registry entry plus a CompileSpec: online scoring uses CUDA graphs,
historical backfills use a no-cudagraphs build with dynamic shapes.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
import torch.nn as nn

log = logging.getLogger("disputes.scoring")


@dataclass(frozen=True)
class CompileSpec:
    mode: str = "reduce-overhead"
    fullgraph: bool = False
    dynamic: bool | None = None


ONLINE = CompileSpec()
BACKFILL = CompileSpec(mode="max-autotune-no-cudagraphs", dynamic=True)


class DisputeModel(nn.Module):
    def __init__(self, n_feat=120, n_reason=64, hid=256):
        super().__init__()
        self.reason_emb = nn.Embedding(n_reason, 32)
        self.mlp = nn.Sequential(nn.Linear(n_feat + 32, hid), nn.ReLU(), nn.Linear(hid, 1))
        self.register_buffer("network_fee", torch.zeros(n_reason))  # scheme fee per reason code, normalised
        self.recent_codes = []

    def forward(self, feats, reason):
        win = torch.sigmoid(self.mlp(torch.cat([feats, self.reason_emb(reason)], -1)).squeeze(-1))
        expected = win - self.network_fee[reason] * (1 - win)
        self.recent_codes = reason[:16].tolist()  # HAZARD: host-sync
        log.debug("batch expected recovery %s", expected.mean())  # HAZARD: host-code
        return win, expected


MODELS = {"dispute_v7": DisputeModel}


class DisputeScorer:
    def __init__(self, name: str, spec: CompileSpec, weights: str | None = None):
        self.model = MODELS[name]().cuda().eval()
        if weights:
            self.model.load_state_dict(torch.load(weights, map_location="cuda"))
        self.fn = torch.compile(self.model, mode=spec.mode, fullgraph=spec.fullgraph, dynamic=spec.dynamic)

    @torch.no_grad()
    def score(self, feats, reason):
        win, ev = self.fn(feats, reason)
        return win.clone(), ev.clone()  # CLEAN: outputs cloned before the next call

    def refresh_fees(self, fee_table):
        self.model.network_fee = fee_table.cuda()  # HAZARD: static-address

    def refresh_fees_inplace(self, fee_table):
        self.model.network_fee.copy_(fee_table)  # CLEAN: in-place update keeps the buffer's address


def serve(queue, weights: str):
    online = DisputeScorer("dispute_v7", ONLINE, weights)
    backfill = DisputeScorer("dispute_v7", BACKFILL, weights)
    for msg in queue:
        if msg["kind"] == "score":
            # disputes are scored as they arrive from the acquirer feed (1..500 per message)
            feats, reason = msg["feats"].cuda(), msg["reason"].cuda()
            yield online.score(feats, reason)  # HAZARD: dynamic-shape
        elif msg["kind"] == "backfill":
            yield backfill.score(msg["feats"].cuda(), msg["reason"].cuda())  # CLEAN: no-cudagraphs build compiled for dynamic shapes
        elif msg["kind"] == "fees":
            online.refresh_fees(msg["table"])
            backfill.refresh_fees_inplace(msg["table"])
