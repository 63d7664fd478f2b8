"""Volcano deformation alerts from wrapped Sentinel-1 interferograms.

A small encoder-decoder maps wrapped phase + coherence to line-of-sight
displacement; a second graph scores coherence loss. Both graphs are replayed for
every new acquisition pair of a monitored volcano.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("insar")
WAVELENGTH_M = 0.0555  # C-band


class DeformNet(nn.Module):
    def __init__(self, c=48):
        super().__init__()
        self.down = nn.Sequential(
            nn.Conv2d(3, c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c, 2 * c, 3, padding=1), nn.ReLU(),
        )
        self.up = nn.Sequential(
            nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
            nn.Conv2d(2 * c, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, 1, 1),
        )

    def forward(self, phase, coh):
        x = torch.cat([torch.sin(phase), torch.cos(phase), coh], dim=1)
        return self.up(self.down(x))  # unwrapped phase, in cycles


class VolcanoMonitor:
    def __init__(self, net, size=256, device="cuda"):
        self.dev = device
        self.net = net.to(device).eval()
        self.phase = torch.zeros(1, 1, size, size, device=device)
        self.coh = torch.zeros(1, 1, size, size, device=device)
        self.side = torch.cuda.Stream()
        self.g_defo = torch.cuda.CUDAGraph()
        self.g_coh = torch.cuda.CUDAGraph()

    def _detect(self, phase, coh):
        cycles = self.net(phase, coh)
        los_m = cycles * WAVELENGTH_M / 2.0
        fringes = torch.unique(torch.round(cycles))  # HAZARD: dynamic-shape
        peak_m = float(los_m.abs().amax())  # HAZARD: host-sync
        torch.cuda.empty_cache()  # HAZARD: memory
        return los_m, fringes.numel(), peak_m

    def _coherence_loss(self, coh):
        smooth = F.avg_pool2d(coh, 5, stride=1, padding=2)
        decorrelated = torch.where(smooth < 0.3, torch.ones_like(smooth), torch.zeros_like(smooth))  # CLEAN: torch.where keeps the shape
        return decorrelated.mean(dim=(2, 3))

    @torch.no_grad()
    def capture(self):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            for _ in range(3):
                self._detect(self.phase, self.coh)
                self._coherence_loss(self.coh)
        torch.cuda.current_stream().wait_stream(self.side)

        with torch.cuda.stream(self.side):
            self.g_coh.capture_begin()  # CLEAN: begun inside a side-stream context
            self.coh_out = self._coherence_loss(self.coh)
            self.g_coh.capture_end()
        torch.cuda.current_stream().wait_stream(self.side)

        self.g_defo.capture_begin()  # HAZARD: stream
        self.defo_out = self._detect(self.phase, self.coh)
        self.g_defo.capture_end()

    def process_pair(self, phase, coh):
        self.phase.copy_(phase)
        self.coh.copy_(coh)
        self.g_coh.replay()
        self.g_defo.replay()
        los_m = self.defo_out[0]
        uplift_cm = 100.0 * los_m.amax().item()  # CLEAN: host read after the replay, outside capture
        if uplift_cm > 2.0:
            log.warning("uplift %.1f cm, coherence loss %.2f", uplift_cm, self.coh_out.item())
        return uplift_cm


if __name__ == "__main__":
    mon = VolcanoMonitor(DeformNet())
    mon.capture()
    for k in range(12):  # one pair per 12-day repeat cycle
        ph = (torch.rand(1, 1, 256, 256, device="cuda") * 2 - 1) * torch.pi
        co = torch.rand(1, 1, 256, 256, device="cuda")
        print(k, round(mon.process_pair(ph, co), 2))
