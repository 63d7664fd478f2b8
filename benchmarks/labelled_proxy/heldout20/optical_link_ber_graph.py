"""OTN link health: pre-FEC BER degradation scoring for coherent DWDM line cards.

v1 eager scorer (2023) plus the CUDA-graph path added during the 2025 migration.  The graphed
path is switched on per region with OTN_GRAPHS=1; both must produce identical reports.
"""
import logging
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("otn.health")
USE_GRAPHS = os.environ.get("OTN_GRAPHS", "0") == "1"


class BerNet(nn.Module):
    """Conv1d over 15-minute PM bins: OSNR, pre-FEC BER, CD, DGD, Rx power, ..."""

    def __init__(self, n_feat=24, hidden=64):
        super().__init__()
        self.conv = nn.Conv1d(n_feat, hidden, 5, padding=2)
        self.head = nn.Linear(hidden, 3)  # ok / degrading / failing

    def forward(self, x):  # x: [links, feat, time]
        return self.head(F.gelu(self.conv(x)).mean(-1))


class LegacyBerScorer:
    def __init__(self, net: BerNet, floor_db: float = 10.5):
        self.net = net.cuda().eval()
        self.floor_t = torch.tensor(floor_db, device="cuda")
        self.n_scored = 0
        self.history = []

    def _normalize(self, x):
        # v1 normalisation, kept bit-for-bit for parity with the monthly reports
        scale = float(x.std()) + 1e-6  # HAZARD: host-sync
        return (x - x.mean(dim=-1, keepdim=True)) / scale

    @torch.no_grad()
    def score(self, x):
        osnr = torch.clamp(x[:, 0], min=self.floor_t)  # CLEAN: clamp against a device-tensor bound
        x = torch.cat([osnr.unsqueeze(1), x[:, 1:]], dim=1)
        probs = self.net(self._normalize(x)).softmax(-1)
        self.n_scored += x.shape[0]  # HAZARD: host-code
        return probs

    def legacy_alarm(self, x):
        probs = self.score(x)
        worst = probs[:, 2].max().item()  # CLEAN: host read after score() returned, outside any capture
        return worst > 0.5


class GraphedBerScorer(LegacyBerScorer):
    def __init__(self, net, n_links=512, n_feat=24, window=96, **kw):
        super().__init__(net, **kw)
        self.static_x = torch.zeros(n_links, n_feat, window, device="cuda")
        self.graph = torch.cuda.CUDAGraph()
        self._captured = False

    def _capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                super().score(self.static_x)
        torch.cuda.current_stream().wait_stream(s)
        self.graph.capture_begin()  # HAZARD: stream
        self.static_out = super().score(self.static_x)
        self.graph.capture_end()
        self._captured = True

    def score(self, x):
        if not self._captured:
            self._capture()
        self.static_x.copy_(x)  # CLEAN: refresh the captured input in place
        self.graph.replay()
        self.history.append(self.static_out)  # HAZARD: static-address
        return self.static_out


def make_scorer(net: BerNet) -> LegacyBerScorer:
    cls = GraphedBerScorer if USE_GRAPHS else LegacyBerScorer
    log.info("OTN scorer: %s", cls.__name__)
    return cls(net)


def quarter_hour_report(scorer: LegacyBerScorer, windows):
    alarms = [scorer.legacy_alarm(w.cuda(non_blocking=True)) for w in windows]
    trend = torch.stack(scorer.history[-12:]).mean(0) if scorer.history else None
    log.info("scored %d links, %d alarms", scorer.n_scored, sum(alarms))
    return trend, alarms
