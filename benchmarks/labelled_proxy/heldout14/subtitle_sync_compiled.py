"""Automatic subtitle re-timing for a streaming catalogue.

A voice-activity net turns the programme's log-mel frames (10 Hz) into a speech track;
the aligner cross-correlates it with the subtitle on/off track to find the offset.
Both modules get `forward = torch.compile(forward, mode="max-autotune")`.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("subsync")
WIN = 6000          # 10 minutes at 10 Hz
N_WIN = 8           # up to 80 minutes per programme


class SpeechActivity(nn.Module):
    def __init__(self, n_mels=64, c=64):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(n_mels, c, 5, padding=2), nn.GELU(),
                                  nn.Conv1d(c, c, 5, padding=2), nn.GELU())
        self.out = nn.Conv1d(c, 1, 1)

    def forward(self, mel):                       # [B, n_mels, T]
        return torch.sigmoid(self.out(self.conv(mel))).squeeze(1)


class CueAligner(nn.Module):
    def __init__(self, max_shift=300):            # +-30 s
        super().__init__()
        self.max_shift = max_shift
        self.sharp = nn.Parameter(torch.tensor(5.0))

    def forward(self, speech, cues):              # [B, T] each
        B = speech.shape[0]
        corr = F.conv1d(F.pad(speech, (self.max_shift, self.max_shift))[None], cues[:, None], groups=B)[0]
        w = (corr * self.sharp / cues.sum(-1, keepdim=True).clamp_min(1.0)).softmax(-1)
        lags = torch.arange(-self.max_shift, self.max_shift + 1, device=w.device, dtype=w.dtype)
        shift = (w * lags).sum(-1)
        log.info("per-window offsets (frames): %s", shift)  # HAZARD: host-code
        seconds = float(shift.median()) / 10.0  # HAZARD: host-sync
        return shift, seconds


def build():
    vad, aligner = SpeechActivity().cuda().eval(), CueAligner().cuda().eval()
    vad.forward = torch.compile(vad.forward, mode="max-autotune")
    aligner.forward = torch.compile(aligner.forward, mode="max-autotune")
    offline = SpeechActivity().cuda().eval()
    offline.load_state_dict(vad.state_dict())
    offline.forward = torch.compile(offline.forward, mode="max-autotune-no-cudagraphs")
    return vad, aligner, offline


def to_windows(x, n_win=N_WIN):
    x = F.pad(x, (0, max(0, n_win * WIN - x.shape[-1])))[..., : n_win * WIN]
    return x.reshape(*x.shape[:-1], n_win, WIN).movedim(-2, 0)


@torch.no_grad()
def sync_programme(vad, aligner, mel, cues):
    speech = vad(to_windows(mel))  # CLEAN: fixed (N_WIN, n_mels, WIN) windows
    shift, seconds = aligner(speech.clone(), to_windows(cues))  # CLEAN: cloned before the hand-over to the other compiled module
    coverage = (speech > 0.5).float().mean()  # HAZARD: static-address
    return seconds, coverage.item()


@torch.no_grad()
def quick_check(vad, mel):
    # ops dashboard: speech ratio of the raw programme, whatever its length
    return vad(mel[None]).mean().item()  # HAZARD: dynamic-shape


@torch.no_grad()
def archive_qc(offline, mels):
    return [offline(m[None]).mean().item() for m in mels]  # CLEAN: no-cudagraphs compile, any length is fine
