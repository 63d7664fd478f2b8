"""Prosody (duration/pitch/energy) predictor for a TTS front end; variance adaptor compiled with reduce-overhead."""
import torch
import torch.nn as nn
import torch.nn.functional as F

class VariancePredictor(nn.Module):
    def __init__(self, d=256):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(d, d, 3, padding=1), nn.ReLU(), nn.Conv1d(d, d, 3, padding=1), nn.ReLU())
        self.out = nn.Linear(d, 1)
    def forward(self, h):
        return self.out(self.conv(h.transpose(1, 2)).transpose(1, 2)).squeeze(-1)

class PitchPredictor(VariancePredictor):
    @classmethod
    def semitone_range(cls):
        return 24.0  # CLEAN: class-level constant
    def forward(self, h):
        p = super().forward(h)
        return torch.tanh(p) * self.semitone_range()

class DurationPredictor(VariancePredictor):
    def forward(self, h):
        d = F.softplus(super().forward(h))
        return self._sanity(d)
    @staticmethod
    def _sanity(d):
        if (d.sum(-1) < 1.0).any():  # HAZARD: dynamic-control-flow
            d = d + 1.0
        return d

class EnergyPredictor(VariancePredictor):
    def forward(self, h):
        e = super().forward(h)
        print("energy range", e.amin(), e.amax())  # HAZARD: host-code
        return e

class VarianceAdaptor(nn.Module):
    def __init__(self, d=256):
        super().__init__()
        self.duration, self.pitch, self.energy = DurationPredictor(d), PitchPredictor(d), EnergyPredictor(d)
        self.pitch_emb, self.energy_emb = nn.Linear(1, d), nn.Linear(1, d)
    def forward(self, h):
        dur = self.duration(h)
        pitch = self.pitch(h)
        energy = self.energy(h)
        h = h + self.pitch_emb(pitch.unsqueeze(-1)) + self.energy_emb(energy.unsqueeze(-1))
        return h, dur, pitch

ADAPTOR = VarianceAdaptor().cuda().eval()

@torch.compile(mode="reduce-overhead")
def predict_prosody(h):
    return ADAPTOR(h)

@torch.compile(mode="max-autotune-no-cudagraphs")
def predict_prosody_dynamic(h):
    return ADAPTOR(h)

class Frontend:
    MAX_PHONES = 128
    def __init__(self, encoder):
        self.encoder = encoder
    def _pad(self, h):
        return F.pad(h, (0, 0, 0, self.MAX_PHONES - h.shape[1]))
    @torch.no_grad()
    def synthesize_batch(self, phones):
        h = self._pad(self.encoder(phones))
        out, dur, pitch = predict_prosody(h)
        return out.clone(), dur.clone(), pitch.clone()  # CLEAN: fixed padded length, outputs cloned
    @torch.no_grad()
    def stream_sentences(self, sentences):
        kept = []
        for phones in sentences:
            out, dur, _ = predict_prosody(self._pad(self.encoder(phones)))
            kept.append(dur)  # HAZARD: static-address
        return torch.cat(kept, 1)
    @torch.no_grad()
    def preview(self, phones):
        return predict_prosody(self.encoder(phones))[1].clone()  # HAZARD: dynamic-shape
    @torch.no_grad()
    def preview_dynamic(self, phones):
        return predict_prosody_dynamic(self.encoder(phones))[1]  # CLEAN: no-cudagraphs build, any length

def narrate(book, encoder):
    fe = Frontend(encoder)
    chapters = [fe.synthesize_batch(p.cuda()) for p in book["chapters"]]
    return chapters, fe.stream_sentences([p.cuda() for p in book["sentences"]]), fe.preview(book["title"].cuda())
