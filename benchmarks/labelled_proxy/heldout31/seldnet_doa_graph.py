"""Streaming SELDnet (sound event localisation and detection) on a 4-mic tetrahedral array.

Log-mel + GCC-PHAT features -> CNN -> GRU -> ACCDOA head (13 classes x xyz), one 100 ms hop
per call. The assistant converted `step()` to a CUDA graph with capture_begin/capture_end.
"""
import itertools
import time

import torch
import torch.nn as nn
import torchaudio

N_MICS, N_CLASSES, HOP = 4, 13, 2400


class SELDnet(nn.Module):
    def __init__(self, n_mels=64, hidden=128):
        super().__init__()
        cin = N_MICS + 6  # 4 log-mel maps + 6 GCC-PHAT maps
        self.cnn = nn.Sequential(
            nn.Conv2d(cin, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d((1, 4)),
            nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d((1, 4)),
        )
        self.gru = nn.GRU(64 * (n_mels // 16), hidden, 2, batch_first=True)
        self.head = nn.Linear(hidden, 3 * N_CLASSES)

    def forward(self, feats, h):
        x = self.cnn(feats).permute(0, 2, 1, 3).flatten(2)
        y, h = self.gru(x, h)
        return torch.tanh(self.head(y[:, -1])).view(-1, N_CLASSES, 3), h


class StreamingSELD:
    def __init__(self, model, class_thresholds, n_fft=1024):
        self.model = model.cuda().eval()
        self.class_thresholds = class_thresholds  # per-class activity thresholds from validation
        self.mel = torchaudio.transforms.MelSpectrogram(24000, n_fft=n_fft, hop_length=480, n_mels=64).cuda()
        self.window = torch.hann_window(n_fft, device="cuda")
        pairs = list(itertools.combinations(range(N_MICS), 2))
        self.pi = torch.tensor([p[0] for p in pairs], device="cuda")  # CLEAN: CUDA index tensors built before capture
        self.pj = torch.tensor([p[1] for p in pairs], device="cuda")
        self.s_audio = torch.zeros(N_MICS, HOP + n_fft, device="cuda")
        self.h = torch.zeros(2, 1, 128, device="cuda")
        self.n_fft = n_fft
        self.last_tick = 0.0
        self.graph = None

    @torch.no_grad()
    def _step(self):
        X = torch.stft(self.s_audio, self.n_fft, 480, window=self.window, return_complex=True)
        logmel = torch.log(self.mel(self.s_audio) + 1e-6)
        cross = X[self.pi] * X[self.pj].conj()  # CLEAN: gather with CUDA index tensors
        gcc = torch.fft.irfft(cross / (cross.abs() + 1e-8), dim=1)[:, :64]
        gcc = torch.cat([gcc[:, -32:], gcc[:, :32]], 1).transpose(1, 2)
        feats = torch.cat([logmel.transpose(1, 2)[:, : gcc.shape[1]], gcc], 0).unsqueeze(0)
        accdoa, h_new = self.model(feats, self.h)
        self.h = h_new  # HAZARD: static-address
        norm = accdoa.norm(dim=-1)
        thr = torch.tensor(self.class_thresholds, device="cuda")  # HAZARD: host-sync
        active = norm[0] > thr
        doa = accdoa[0][active]  # HAZARD: dynamic-shape
        self.last_tick = time.perf_counter()  # HAZARD: host-code
        return norm, doa

    def capture(self):
        for _ in range(3):
            self._step()
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        self.graph.capture_begin()  # HAZARD: stream
        self.s_norm, self.s_doa = self._step()
        self.graph.capture_end()

    def push(self, block):
        """block: (4, 2400) float32 CUDA tensor, the newest 100 ms."""
        if self.graph is None:
            self.capture()
        self.s_audio[:, :-HOP].copy_(self.s_audio[:, HOP:].clone())  # CLEAN: ring shift into the static buffer
        self.s_audio[:, -HOP:].copy_(block)
        self.graph.replay()
        return self.s_norm.clone(), self.s_doa.clone()

    def reset(self):
        self.h.zero_()  # CLEAN: in-place reset
