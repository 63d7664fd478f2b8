"""Intrapartum cardiotocography (CTG) surveillance for a labour ward.

`GraphRunner` captures `_body` once and replays it; `CTGMonitor` streams one
1-second frame per bed (fetal heart rate, uterine activity) through an LSTM and
a risk head. `BenchCTGMonitor` is the variant used on the simulator bench.
"""
import logging
import time

import torch
import torch.nn as nn

log = logging.getLogger("ctg")


class GraphRunner:
    def __init__(self, device="cuda"):
        self.dev = device
        self.graph = torch.cuda.CUDAGraph()
        self.stream = torch.cuda.Stream()

    def _alloc(self):
        raise NotImplementedError

    def _body(self):
        raise NotImplementedError

    @torch.no_grad()
    def capture(self, warmup=3):
        self._alloc()
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            for _ in range(warmup):
                self._body()
        torch.cuda.current_stream().wait_stream(self.stream)
        with torch.cuda.graph(self.graph, stream=self.stream):
            self.out = self._body()

    def step(self):
        self.graph.replay()
        return self.out


class CTGMonitor(GraphRunner):
    def __init__(self, lstm: nn.LSTM, head: nn.Module, beds=8, device="cuda"):
        super().__init__(device)
        self.lstm, self.head = lstm.to(device).eval(), head.to(device).eval()
        self.beds = beds
        self.baseline_bpm = 140.0
        self.labour_start = time.monotonic()

    def _alloc(self):
        hid = self.lstm.hidden_size
        self.frame = torch.zeros(self.beds, 1, 2, device=self.dev)  # (FHR bpm, UA mmHg)
        self.h = torch.zeros(1, self.beds, hid, device=self.dev)
        self.c = torch.zeros(1, self.beds, hid, device=self.dev)

    def _update_state(self, h, c):
        self.h, self.c = h, c  # HAZARD: static-address

    def _body(self):
        log.debug("ctg tick")  # CLEAN: plain-string log, no tensor is formatted
        baseline = self.baseline_bpm  # HAZARD: python-scalar
        fhr, ua = self.frame[..., :1], self.frame[..., 1:]
        x = torch.cat([(fhr - baseline) / 25.0, ua / 100.0], dim=-1)
        y, (h, c) = self.lstm(x, (self.h, self.c))
        self._update_state(h, c)
        hours = (time.monotonic() - self.labour_start) / 3600.0  # HAZARD: host-code
        feats = torch.cat([y[:, -1], torch.full((self.beds, 1), hours, device=self.dev)], dim=-1)
        risk = torch.sigmoid(self.head(feats))
        if (fhr[:, -1, 0] < baseline - 15.0).any():  # HAZARD: dynamic-control-flow
            risk = torch.maximum(risk, torch.full_like(risk, 0.5))
        return risk


class BenchCTGMonitor(CTGMonitor):
    """Simulator bench: the recurrent state is updated in place."""

    def _update_state(self, h, c):
        self.h.copy_(h)  # CLEAN: in-place state update, the addresses stay fixed
        self.c.copy_(c)


if __name__ == "__main__":
    lstm = nn.LSTM(2, 64, batch_first=True)
    head = nn.Sequential(nn.Linear(65, 32), nn.ReLU(), nn.Linear(32, 1))
    mon = CTGMonitor(lstm, head)
    mon.capture()
    mon.baseline_bpm = 128.0  # midwife re-estimates the baseline after 20 minutes
    offset = torch.tensor([135.0, 30.0], device="cuda")
    for t in range(240):
        mon.frame.copy_(torch.randn(8, 1, 2, device="cuda") * 10 + offset)
        risk = mon.step()
        if t % 60 == 0:
            print("max risk", risk.max().cpu().item())  # CLEAN: host read after the replay
