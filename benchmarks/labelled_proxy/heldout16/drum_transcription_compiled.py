"""Drum transcription for a music-learning app (kick, snare, hi-hat, toms, cymbals).

Log-mel frames -> conv stack -> bidirectional GRU -> per-drum onset activations,
then peak picking. The app's "practice mode" transcribes songs in fixed 10 s
windows so the scoring screen can start early; the uploads page shows a preview
from a separate model compiled without CUDA graphs.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchaudio

SR, HOP, N_MELS, N_DRUMS = 44100, 441, 128, 5
WINDOW_S = 10
THRESHOLDS = {"beginner": 0.35, "intermediate": 0.45, "pro": 0.55}


class OnsetNet(nn.Module):
    def __init__(self, hidden: int = 128):
        super().__init__()
        self.mel = torchaudio.transforms.MelSpectrogram(SR, n_fft=2048, hop_length=HOP, n_mels=N_MELS)
        self.conv = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d((4, 1)),
                                  nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d((4, 1)))
        self.gru = nn.GRU(32 * (N_MELS // 16), hidden, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, N_DRUMS)
        self.onset_thr = 0.5

    def forward(self, wav):
        spec = torch.log1p(self.mel(wav))                             # (B, mels, frames)
        x = self.conv(spec[:, None]).flatten(1, 2).transpose(1, 2)    # (B, frames, feat)
        h, _ = self.gru(x)
        act = torch.sigmoid(self.head(h))                             # (B, frames, drums)
        local_max = F.max_pool1d(act.transpose(1, 2), 5, 1, 2).transpose(1, 2)
        thr = self.onset_thr  # HAZARD: python-scalar
        onsets = (act == local_max) & (act > thr)
        n_hits = int(onsets.sum())  # HAZARD: host-sync
        return onsets, act, n_hits


class Transcriber:
    def __init__(self):
        self.model = OnsetNet().cuda().eval()
        self.model.forward = torch.compile(self.model.forward, mode="max-autotune")
        self.preview_model = OnsetNet().cuda().eval()
        self.preview_model.load_state_dict(self.model.state_dict())
        self.preview_model.forward = torch.compile(self.preview_model.forward, mode="max-autotune-no-cudagraphs")
        self.bars, self.curves = [], []

    @torch.no_grad()
    def transcribe_song(self, wav):
        """Whole song in one call (used by the export-to-MIDI button)."""
        onsets, act, n = self.model(wav)  # HAZARD: dynamic-shape
        return onsets.clone(), n

    @torch.no_grad()
    def practice_mode(self, wav, level: str):
        self.model.onset_thr = THRESHOLDS[level]
        win = WINDOW_S * SR
        wav = F.pad(wav, (0, -wav.shape[-1] % win))
        for chunk in wav.split(win, dim=-1):
            onsets, act, _ = self.model(chunk)  # CLEAN: fixed 10 s windows, one graph
            self.bars.append(onsets)  # HAZARD: static-address
            self.curves.append(act.clone())  # CLEAN: cloned before it is kept
        return self.bars, self.curves

    @torch.no_grad()
    def upload_preview(self, wav):
        onsets, act, n = self.preview_model(wav)  # CLEAN: no-cudagraphs twin, any length is fine
        return act.mean(1), n


def hits_per_drum(onsets_list):
    total = torch.stack([o.sum((0, 1)) for o in onsets_list]).sum(0)
    return dict(zip(["kick", "snare", "hihat", "toms", "cymbals"], total.tolist()))  # CLEAN: eager, outside the compiled model


if __name__ == "__main__":
    tr = Transcriber()
    song = torch.randn(1, SR * 95, device="cuda")
    bars, curves = tr.practice_mode(song, "beginner")
    print(hits_per_drum(bars))
    print(tr.upload_preview(torch.randn(1, SR * 33, device="cuda"))[1])
    print(tr.transcribe_song(song)[1])
