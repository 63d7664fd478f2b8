"""Lithography hotspot detection on layout clips (1.2 um x 1.2 um, rasterised to
128 x 128) before OPC sign-off. Scoring functions are compiled with a module-level
`CG = {"triton.cudagraphs": True}` options dict.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CG = {"triton.cudagraphs": True}


class HotspotNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.feat = nn.Sequential(
            nn.Conv2d(4, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.cls = nn.Linear(64, 1)
        self.register_buffer("dose_map", torch.ones(1, 1, 128, 128))  # per-scanner dose correction

    def forward(self, clips):
        aerial = F.avg_pool2d(clips * self.dose_map, 9, 1, 4)  # crude optical low-pass
        return torch.sigmoid(self.cls(self.feat(torch.cat([clips, aerial], 1)))).squeeze(-1)


MODEL = HotspotNet().cuda().eval()


@torch.compile(options=CG)
def score_clips(clips):
    t0 = time.perf_counter()  # HAZARD: host-code
    return MODEL(clips), t0


@torch.compile(options=CG)
def hotspot_report(scores, clips):
    flagged = clips[scores > 0.5]  # HAZARD: dynamic-shape
    density = flagged.mean(dim=(1, 2, 3))
    n_hot = int((scores > 0.5).sum())  # HAZARD: host-sync
    return density, n_hot


@torch.compile(options=CG)
def soft_flags(scores):
    return torch.where(scores > 0.5, scores, torch.zeros_like(scores))  # CLEAN: torch.where, fixed shape


def load_scanner_calibration(dose):
    """New scanner for the lot: swap in its dose map."""
    MODEL.dose_map = dose.cuda().view(1, 1, 128, 128)  # HAZARD: static-address


def refresh_scanner_calibration(dose):
    """Same scanner, re-measured dose map."""
    MODEL.dose_map.copy_(dose.view(1, 1, 128, 128))  # CLEAN: in-place update keeps the buffer address


@torch.no_grad()
def signoff(lot, scanner_swaps, dose_refresh):
    start = time.perf_counter()  # CLEAN: wall-clock timing outside the compiled functions
    total_hot = 0
    for k, clips in enumerate(lot):
        if k in scanner_swaps:
            load_scanner_calibration(scanner_swaps[k])
        if k in dose_refresh:
            refresh_scanner_calibration(dose_refresh[k].cuda())
        scores, _ = score_clips(clips)
        scores = scores.clone()
        flags = soft_flags(scores).clone()
        density, n_hot = hotspot_report(scores, clips)
        total_hot += n_hot
    return total_hot, time.perf_counter() - start


if __name__ == "__main__":
    lot = [(torch.rand(512, 2, 128, 128, device="cuda") > 0.6).float() for _ in range(40)]
    swaps = {20: torch.rand(128, 128) * 0.1 + 0.95}
    refresh = {10: torch.rand(128, 128) * 0.05 + 0.975}
    hot, secs = signoff(lot, swaps, refresh)
    print(f"{hot} hotspot clips in {secs:.2f} s")
