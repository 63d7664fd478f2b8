"""Volumetric DDoS detection on an edge router (asyncio sFlow collector).

sFlow samples arrive over UDP; the collector aggregates them into per-destination flow
features every aggregation window, scores them with a small set-transformer-like model
compiled with backend="cudagraphs", and installs FlowSpec drop rules for the top victims.
During a confirmed attack the window shrinks from 1 s to 250 ms to react faster.
"""
import asyncio
from collections import defaultdict

import torch
import torch.nn as nn

FEAT, MAX_DST = 12, 4096


class FlowScorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Sequential(nn.Linear(FEAT, 64), nn.ReLU(), nn.Linear(64, 64))
        self.score = nn.Linear(128, 1)
        self.window_s = 1.0

    def forward(self, feats):
        feats.clamp_(min=0).log1p_()  # HAZARD: static-address
        w = self.window_s  # HAZARD: python-scalar
        rate = feats / w
        h = self.embed(rate)
        ctx = h.mean(0, keepdim=True).expand_as(h)
        return self.score(torch.cat([h, ctx], -1)).squeeze(-1)


class Collector(asyncio.DatagramProtocol):
    def __init__(self, dev="cuda"):
        self.dev = dev
        self.model = FlowScorer().to(dev).eval()
        self.scorer = torch.compile(self.model, backend="cudagraphs")
        self.flows = defaultdict(lambda: [0.0] * FEAT)
        self.dst_index = {}
        self.buf = torch.zeros(MAX_DST, FEAT, device=dev)

    def datagram_received(self, data, addr):
        for dst, vec in decode_sflow(data):
            acc = self.flows[dst]
            for i, v in enumerate(vec):
                acc[i] += v

    def _features(self):
        keys = list(self.flows)[:MAX_DST]
        feats = torch.tensor([self.flows[k] for k in keys], device=self.dev)  # CLEAN: eager upload outside the compiled model
        self.flows.clear()
        return keys, feats

    @torch.no_grad()
    def score_window(self):
        keys, feats = self._features()
        scores = self.scorer(feats)  # HAZARD: dynamic-shape
        return keys, scores.clone()

    @torch.no_grad()
    def score_window_padded(self):
        keys, feats = self._features()
        self.buf.zero_()
        self.buf[:len(keys)].copy_(feats)
        scores = self.scorer(self.buf.clone()).clone()
        top = scores[:len(keys)].topk(min(8, len(keys))).indices.tolist()  # CLEAN: eager read-back after the compiled call
        return [keys[i] for i in top], keys, scores


@torch.compile(backend="cudagraphs")
def victims(scores, thresh):
    hot = torch.where(scores > thresh, scores, torch.full_like(scores, -1e9))  # CLEAN: fixed-shape select
    return hot.topk(8).indices.tolist()  # HAZARD: host-sync


def decode_sflow(data):
    return []


async def detector_loop(collector, router):
    under_attack = False
    while True:
        await asyncio.sleep(collector.model.window_s)
        top, keys, scores = collector.score_window_padded()
        if not keys:
            continue
        under_attack = bool((scores > 3.0).any())  # CLEAN: eager check on a cloned output
        collector.model.window_s = 0.25 if under_attack else 1.0
        if under_attack:
            router.install_flowspec([keys[i] for i in victims(scores, 3.0) if i < len(keys)])


async def main(router, port=6343):
    loop = asyncio.get_running_loop()
    transport, collector = await loop.create_datagram_endpoint(Collector, local_addr=("0.0.0.0", port))
    await detector_loop(collector, router)
