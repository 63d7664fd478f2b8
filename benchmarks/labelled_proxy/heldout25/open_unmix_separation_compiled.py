"""Karaoke mode: vocal removal with an Open-Unmix style spectrogram-mask separator.

The song is processed in 10 s chunks; a BiLSTM predicts a vocal magnitude mask, then a
few soft "Wiener" refinement iterations run on the mixture. Users pick the quality
(number of refinement iterations) in the settings screen.
"""
import logging

import torch
import torch.nn as nn

log = logging.getLogger("karaoke.unmix")
N_FFT, HOP, SR = 4096, 1024, 44100
CHUNK = 10 * SR


class OpenUnmix(nn.Module):
    def __init__(self, bins=2049, hidden=512):
        super().__init__()
        self.bins = bins
        self.fc1 = nn.Sequential(nn.Linear(2 * 1487, hidden), nn.BatchNorm1d(hidden), nn.Tanh())
        self.lstm = nn.LSTM(hidden, hidden // 2, num_layers=3, bidirectional=True, batch_first=True)
        self.fc2 = nn.Sequential(nn.Linear(2 * hidden, bins * 2), nn.ReLU())
        self.niter = 1
        self.register_buffer("window", torch.hann_window(N_FFT))

    def forward(self, audio):                      # audio: (2, samples)
        spec = torch.stft(audio, N_FFT, HOP, window=self.window, return_complex=True)
        mag = spec.abs()                           # (2, bins, frames)
        x = mag[:, :1487].permute(2, 0, 1).reshape(mag.shape[-1], -1)
        h = self.fc1(x)
        h = torch.cat([h, self.lstm(h[None])[0][0]], -1)
        est = self.fc2(h).view(-1, 2, self.bins).permute(1, 2, 0) * mag
        mask = est / (mag + 1e-8)
        log.debug("vocal mask mean %.3f", mask.mean())  # HAZARD: host-code
        for _ in range(self.niter):  # HAZARD: python-scalar
            v = (mask * mag) ** 2
            mask = v / (v + ((1 - mask) * mag) ** 2 + 1e-8)
        mask = torch.where(mask < 0.05, torch.zeros_like(mask), mask)  # CLEAN: gating by select keeps the shape static
        inst = torch.istft(spec * (1 - mask), N_FFT, HOP, window=self.window, length=audio.shape[-1])
        return inst


class Karaoke:
    def __init__(self, model):
        self.model = model.cuda().eval()
        self.sep = torch.compile(self.model, mode="reduce-overhead")
        self.sep_preview = torch.compile(self.model, mode="max-autotune-no-cudagraphs")

    def set_quality(self, level):
        self.model.niter = {"fast": 0, "normal": 1, "best": 3}[level]

    @torch.no_grad()
    def instrumental(self, song):
        song = song.cuda()
        chunks = []
        for start in range(0, song.shape[-1], CHUNK):
            piece = song[:, start:start + CHUNK]
            out = self.sep(piece)  # HAZARD: dynamic-shape
            chunks.append(out)  # HAZARD: static-address
        return torch.cat(chunks, -1).cpu()

    @torch.no_grad()
    def preview(self, song, seconds=20):
        clip = song[:, : seconds * SR].cuda()
        parts = [self.sep_preview(clip[:, s:s + CHUNK]) for s in range(0, clip.shape[-1], CHUNK)]  # CLEAN: no CUDA graphs in this mode
        return torch.cat(parts, -1).cpu()

    @torch.no_grad()
    def instrumental_padded(self, song):
        n = song.shape[-1]
        song = torch.nn.functional.pad(song.cuda(), (0, (-n) % CHUNK))
        chunks = [self.sep(song[:, s:s + CHUNK]).clone() for s in range(0, song.shape[-1], CHUNK)]  # CLEAN: fixed chunk shape, outputs cloned
        return torch.cat(chunks, -1)[:, :n].cpu()
