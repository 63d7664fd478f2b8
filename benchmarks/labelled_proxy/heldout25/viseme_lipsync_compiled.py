"""Real-time lip sync for game characters: mic / dialogue audio -> 15 viseme weights
(Oculus-style set) plus an emotion head that drives the brows. Every 33 ms the engine
sends 1024-sample windows (16 kHz) for each talking character, batch of 16 slots.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

VISEMES = ["sil", "PP", "FF", "TH", "DD", "kk", "CH", "SS", "nn", "RR", "aa", "E", "ih", "oh", "ou"]


class AudioEncoder(nn.Module):
    def __init__(self, n_mels=40, hidden=128):
        super().__init__()
        self.register_buffer("mel_fb", torch.rand(n_mels, 257))
        self.conv = nn.Sequential(nn.Conv1d(n_mels, hidden, 3, padding=1), nn.GELU(),
                                  nn.Conv1d(hidden, hidden, 3, padding=1), nn.GELU())

    def forward(self, wav):
        spec = torch.stft(wav, 512, 128, window=torch.hann_window(512, device=wav.device),
                          return_complex=True).abs() ** 2
        mel = torch.log(self.mel_fb @ spec + 1e-6)
        return self.conv(mel)


class VisemeHead(nn.Module):
    def __init__(self, hidden=128):
        super().__init__()
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, len(VISEMES))
        self.smoothing = 0.6
        self.silence_db = -50.0

    def forward(self, feats, energy_db, prev):
        h, _ = self.gru(feats.transpose(1, 2))
        w = torch.softmax(self.out(h[:, -1]), -1)
        if energy_db.mean() < self.silence_db:  # HAZARD: dynamic-control-flow
            w = F.one_hot(torch.zeros_like(w[:, 0]).long(), len(VISEMES)).float()
        a = self.smoothing  # HAZARD: python-scalar
        w = a * prev + (1 - a) * w
        return w, w.cpu()  # HAZARD: host-sync


class LipSync:
    def __init__(self, enc, head, emotion, slots=16):
        self.enc = torch.compile(enc.cuda().eval(), mode="reduce-overhead")
        self.head = torch.compile(head.cuda().eval(), mode="reduce-overhead")
        self.emotion = torch.compile(emotion.cuda().eval(), mode="reduce-overhead")
        self.head_eager = head
        self.prev = torch.zeros(slots, len(VISEMES), device="cuda")
        self.wav = torch.zeros(slots, 1024, device="cuda")

    def set_character(self, style):
        self.head_eager.smoothing = {"cartoon": 0.3, "realistic": 0.6, "robot": 0.85}[style]

    @torch.no_grad()
    def tick(self, wav_host):
        self.wav.copy_(wav_host, non_blocking=True)  # CLEAN: pinned staging buffer copied into a fixed slot tensor
        energy_db = 10 * torch.log10(self.wav.pow(2).mean(-1) + 1e-10)
        mood = self.emotion(self.wav).clone()  # CLEAN: cloned right after its own call
        feats = self.enc(self.wav)
        w, w_host = self.head(feats.clone(), energy_db, self.prev)  # CLEAN: encoder output cloned before the hand-over
        self.prev.copy_(w)  # CLEAN: smoothing state copied in place, outside the graph
        brows = feats.mean((1, 2))  # HAZARD: static-address
        return w_host, mood, brows


def engine_loop(ls, audio_bus, rig):
    staging = torch.empty(16, 1024).pin_memory()
    for frame in audio_bus:
        staging.copy_(torch.from_numpy(frame))
        weights, mood, brows = ls.tick(staging)
        rig.apply(dict(zip(VISEMES, weights.mean(0).tolist())), mood.cpu(), brows.cpu())  # CLEAN: eager readback of host copies
