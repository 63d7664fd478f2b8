"""Driver-monitoring system for long-haul trucks: eye openness from the in-cabin IR cameras
and PERCLOS over a 3-second window (90 frames at 30 fps), one graph per camera seat.
"""
import logging

import torch
import torch.nn as nn

log = logging.getLogger("dms")


class EyeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 2))   # left / right eye openness

    def forward(self, face):
        return self.body(face)


class DrowsinessMonitor:
    def __init__(self, net, seats=("driver", "codriver"), window=90):
        self.net = net.cuda().eval()
        self.graph = torch.cuda.CUDAGraph()
        self.pool = torch.cuda.graph_pool_handle()
        self.inputs, self.outputs = {}, {}
        self.hist = {s: torch.zeros(window, device="cuda") for s in seats}
        self.alert_flag = {s: torch.zeros((), device="cuda") for s in seats}
        self.alert_stream = torch.cuda.Stream()
        self.thr = torch.full((), 0.15, device="cuda")

    def _step(self, seat, face):
        openness = self.net(face).sigmoid().mean(1)                      # (1,)
        closed = (openness < 0.2).float()
        self.hist[seat] = torch.cat([self.hist[seat][1:], closed])  # HAZARD: static-address
        perclos = self.hist[seat].mean()
        alert = torch.where(perclos > self.thr, 1.0, 0.0)  # CLEAN: device-side threshold, no host branch
        with torch.cuda.stream(self.alert_stream):  # HAZARD: stream
            self.alert_flag[seat].copy_(alert)
        return perclos, alert

    @torch.no_grad()
    @torch.autocast("cuda", dtype=torch.float16)  # HAZARD: autocast-cache
    def capture(self):
        for seat in self.hist:
            face = torch.zeros(1, 1, 96, 96, device="cuda")
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    self._step(seat, face)
            torch.cuda.current_stream().wait_stream(s)
            with torch.cuda.graph(self.graph, pool=self.pool):  # HAZARD: api-misuse
                log.info("capturing PERCLOS graph for seat %s", seat)  # CLEAN: plain-string log, no tensor is formatted
                self.outputs[seat] = self._step(seat, face)
            self.inputs[seat] = face

    def update(self, seat, face):
        self.inputs[seat].copy_(face)  # CLEAN: copy_ into the static frame buffer
        self.graph.replay()
        perclos, alert = self.outputs[seat]
        return perclos, alert


def run_cabin(monitor, cameras, chime):
    for frames in cameras:
        for seat, face in frames.items():
            perclos, alert = monitor.update(seat, face)
            if alert.item() > 0:  # CLEAN: host read after the replay
                chime.ring(seat, float(perclos))


if __name__ == "__main__":
    mon = DrowsinessMonitor(EyeNet())
    mon.capture()
    stream = ({"driver": torch.rand(1, 1, 96, 96, device="cuda"),
               "codriver": torch.rand(1, 1, 96, 96, device="cuda")} for _ in range(300))
    run_cabin(mon, stream, chime=type("Chime", (), {"ring": lambda self, s, p: None})())
