"""Heart-rate estimation from wrist PPG with accelerometer-based motion-artefact removal
(IEEE SPC-style 8 s windows, 2 s hop, 64 Hz). Estimators are compiled through a
project-wide `rcompile = partial(torch.compile, mode="reduce-overhead")`.
"""
import functools
import time

import torch
import torch.nn as nn

FS, WIN, HOP = 64, 512, 128
NFFT = 2048
MOTION_THR = 0.15                                     # g, std of |acc|
rcompile = functools.partial(torch.compile, mode="reduce-overhead")


class SpectrumNet(nn.Module):
    """Scores 0.5-3.5 Hz bins of the cleaned PPG spectrum (30-210 bpm)."""

    def __init__(self, n_bins=96):
        super().__init__()
        self.n_bins = n_bins
        self.net = nn.Sequential(nn.Conv1d(2, 32, 7, padding=3), nn.ReLU(), nn.Conv1d(32, 32, 7, padding=3),
                                 nn.ReLU(), nn.Conv1d(32, 1, 1))

    def forward(self, ppg_spec, acc_spec):
        return self.net(torch.stack([ppg_spec, acc_spec], 1)).squeeze(1)


def band(spec):
    lo = int(0.5 * NFFT / FS)
    return spec[..., lo: lo + 96]


@rcompile
def estimate_hr(model, ppg, acc):
    t_start = time.time()  # HAZARD: host-code
    ppg = ppg - ppg.mean(-1, keepdim=True)
    win = torch.hann_window(ppg.shape[-1], device=ppg.device)
    P = band(torch.fft.rfft(ppg * win, n=NFFT).abs())
    A = band(torch.fft.rfft((acc - acc.mean(-1, keepdim=True)) * win, n=NFFT).abs().sum(1))
    motion = acc.norm(dim=1).std(-1)
    if motion.max() > MOTION_THR:  # HAZARD: dynamic-control-flow
        P = (P - 0.8 * A / A.amax(-1, keepdim=True) * P.amax(-1, keepdim=True)).clamp_min(0)
    scores = model(P / P.amax(-1, keepdim=True), A / A.amax(-1, keepdim=True).clamp_min(1e-6))
    peak = int(scores.argmax(-1)[0])  # HAZARD: host-sync
    bpm = 60.0 * (int(0.5 * NFFT / FS) + peak) * FS / NFFT
    return bpm, scores, t_start


@rcompile
def estimate_hr_gated(model, ppg, acc):
    ppg = ppg - ppg.mean(-1, keepdim=True)
    win = torch.hann_window(WIN, device=ppg.device)
    P = band(torch.fft.rfft(ppg * win, n=NFFT).abs())
    A = band(torch.fft.rfft((acc - acc.mean(-1, keepdim=True)) * win, n=NFFT).abs().sum(1))
    moving = (acc.norm(dim=1).std(-1, keepdim=True) > MOTION_THR)
    cleaned = (P - 0.8 * A / A.amax(-1, keepdim=True) * P.amax(-1, keepdim=True)).clamp_min(0)
    P = torch.where(moving, cleaned, P)  # CLEAN: motion gating with where, no branch
    scores = model(P / P.amax(-1, keepdim=True), A / A.amax(-1, keepdim=True).clamp_min(1e-6))
    bins = scores.argmax(-1) + int(0.5 * NFFT / FS)  # CLEAN: argmax kept on the device, int() of a constant
    return 60.0 * bins.float() * FS / NFFT


class WristTracker:
    def __init__(self, model, v2=False):
        self.model = model.eval().cuda()
        self.v2 = v2
        self.fixed_ppg = torch.zeros(1, WIN, device="cuda")
        self.fixed_acc = torch.zeros(1, 3, WIN, device="cuda")

    @torch.no_grad()
    def push(self, ppg_win, acc_win, valid):
        """One 8 s window from the watch; `valid` marks samples that arrived (BLE drops packets)."""
        ppg_win, acc_win, valid = ppg_win.cuda(), acc_win.cuda(), valid.cuda()
        if self.v2:
            self.fixed_ppg.copy_(torch.where(valid, ppg_win, ppg_win[valid].mean()))
            self.fixed_acc.copy_(torch.where(valid.unsqueeze(1), acc_win, 0.0))
            return estimate_hr_gated(self.model, self.fixed_ppg, self.fixed_acc).item()  # CLEAN: fixed 8 s window, gaps filled
        ppg, acc = ppg_win[:, valid[0]], acc_win[..., valid[0]]          # drop the lost samples
        bpm, _, _ = estimate_hr(self.model, ppg, acc)  # HAZARD: dynamic-shape
        return bpm
