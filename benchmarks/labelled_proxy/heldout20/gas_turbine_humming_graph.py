"""Combustion-dynamics ("humming") early warning for a heavy-duty gas-turbine fleet.

`StreamingMonitor` is the fleet-monitoring base class (template methods `_prepare` and
`_classify`); the graphed subclass replays one captured step per 2 s window of
dynamic-pressure data from the 12 can-annular combustor transducers.
"""
import logging

import torch
import torch.nn as nn

log = logging.getLogger("fleetmon.humming")


class StreamingMonitor:
    def __init__(self, model, n_sensors=12, window=8192):
        self.model = model.cuda().eval()
        self.n_sensors, self.window = n_sensors, window
        self.mic_gain = 1.0  # transducer gain, re-read from the historian after outages
        self.trip_level = 0.8

    def _prepare(self, x):
        raise NotImplementedError

    def _classify(self, feats):
        return torch.sigmoid(self.model(feats))

    def on_window(self, x):
        return self._classify(self._prepare(x))

    def recalibrate(self, gain: float):
        self.mic_gain = gain


class HummingNet(nn.Module):
    def __init__(self, n_sensors=12, n_bands=64):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(n_sensors * n_bands, 256), nn.GELU(), nn.Linear(256, 3))

    def forward(self, f):  # classes: stable / lean blow-out precursor / humming
        return self.mlp(f.flatten(1))


class GraphedHummingMonitor(StreamingMonitor):
    def __init__(self, model, n_bands=64, **kw):
        super().__init__(model, **kw)
        self.n_bands = n_bands
        self.window_fn = torch.hann_window(self.window, device="cuda")  # CLEAN: window built on the GPU once
        self.static_x = torch.zeros(1, self.n_sensors, self.window, device="cuda")

    @torch.no_grad()
    def _prepare(self, x):
        gain = self.mic_gain  # HAZARD: python-scalar
        spec = torch.fft.rfft(x.float() * gain * self.window_fn, dim=-1).abs()
        bands = spec[..., 1:].unflatten(-1, (self.n_bands, -1)).mean(-1)
        return torch.log1p(bands)

    @torch.no_grad()
    def _classify(self, feats):
        risk = torch.sigmoid(self.model(feats))
        log.debug(f"window risk max={risk.amax():.3f}")  # HAZARD: host-sync
        if (risk[:, 2] > self.trip_level).any():  # HAZARD: dynamic-control-flow
            risk = torch.cat([risk[:, :2], torch.ones_like(risk[:, 2:])], dim=1)
        return risk

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            with torch.cuda.stream(s):
                for _ in range(3):
                    self.on_window(self.static_x)
            torch.cuda.current_stream().wait_stream(s)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.static_risk = self.on_window(self.static_x)

    def on_window_graphed(self, x):
        self.static_x.copy_(x)
        self.graph.replay()
        return self.static_risk.clone()  # CLEAN: cloned before the next window overwrites it


def read_gain_from_historian(unit_id: str) -> float:
    # stand-in for the PI historian client used in production
    return 1.0 + 0.01 * (sum(map(ord, unit_id)) % 7)


def run_unit(unit_id: str, windows, model: HummingNet):
    mon = GraphedHummingMonitor(model)
    torch.cuda.synchronize()  # CLEAN: sync before the capture, outside the region
    mon.capture()
    for i, x in enumerate(windows):
        if i and i % 43200 == 0:  # once a day
            mon.recalibrate(read_gain_from_historian(unit_id))
        risk = mon.on_window_graphed(x)
        if risk[0, 2].item() > mon.trip_level:  # CLEAN: host read of the cloned result after the replay
            log.error("unit %s: humming trip level reached", unit_id)
