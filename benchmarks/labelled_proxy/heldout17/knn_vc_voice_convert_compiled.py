"""kNN-VC any-to-any voice conversion: WavLM features of the source utterance are replaced
by the mean of their k nearest neighbours in the target speaker's matching set, then vocoded.

Stages are compiled with COMPILE_KW (max-autotune, static shapes).
"""
import logging

import torch
import torch.nn.functional as F

log = logging.getLogger("knnvc")
COMPILE_KW = dict(mode="max-autotune", dynamic=False)
PREVIEW_KW = dict(mode="max-autotune-no-cudagraphs")
SR, HOP, CHUNK_S = 16000, 320, 2.0


class KNNVC:
    def __init__(self, wavlm, vocoder, matching_set, k=4, layer=6):
        self.wavlm = wavlm.eval().cuda()
        self.vocoder = vocoder.eval().cuda()
        self.matching = matching_set.cuda()  # [N, 1024] target speaker features
        self.k, self.layer = k, layer
        self.convert = torch.compile(self._convert, **COMPILE_KW)
        self.loudnorm_ = torch.compile(self._loudnorm_, **COMPILE_KW)
        self.preview = torch.compile(self._convert, **PREVIEW_KW)

    @classmethod
    def from_reference(cls, wavlm, vocoder, reference_wavs, layer=6, max_frames=200_000):
        """Build the matching set from a few minutes of the target speaker (eager, before compiling)."""
        wavlm = wavlm.eval().cuda()
        with torch.no_grad():
            feats = [wavlm(w.cuda().unsqueeze(0), output_hidden_states=True).hidden_states[layer][0]
                     for w in reference_wavs]
        return cls(wavlm, vocoder, torch.cat(feats)[:max_frames], layer=layer)

    def _loudnorm_(self, wav, target_rms):
        rms = wav.pow(2).mean(-1, keepdim=True).sqrt()
        wav.mul_(target_rms / (rms + 1e-6))  # HAZARD: static-address
        return wav

    def _features(self, wav):
        hidden = self.wavlm(wav, output_hidden_states=True).hidden_states
        return hidden[self.layer][0]

    def _convert(self, wav):
        feats = self._features(wav)
        energy = feats.pow(2).mean(-1)
        voiced = energy > 0.1 * energy.mean()
        n_voiced = int(voiced.sum())  # HAZARD: host-sync
        log.debug("converting %d frames (%d voiced)", feats.shape[0], n_voiced)  # HAZARD: host-code
        dist = torch.cdist(feats, self.matching)
        idx = dist.topk(self.k, largest=False).indices  # CLEAN: fixed-k topk, no data-dependent shape
        matched = self.matching[idx].mean(1)
        matched = torch.where(voiced[:, None], matched, feats)
        return self.vocoder(matched.unsqueeze(0)).squeeze(0)

    @torch.no_grad()
    def convert_file(self, wav):  # a whole uploaded utterance, any length
        wav = wav.cuda() / wav.abs().max().clamp_min(1e-6) * 0.9
        return self.convert(wav.unsqueeze(0)).clone()  # HAZARD: dynamic-shape

    @torch.no_grad()
    def convert_stream(self, chunks):  # fixed 2 s chunks from the live call
        out = []
        n = int(SR * CHUNK_S)
        for c in chunks:
            c = F.pad(c.cuda(), (0, n - c.shape[-1]))
            self.loudnorm_(c.unsqueeze(0), 0.05)
            out.append(self.convert(c.unsqueeze(0)).clone())  # CLEAN: fixed chunk length, output cloned
        return torch.cat(out)

    @torch.no_grad()
    def preview_file(self, wav):
        return self.preview(wav.cuda().unsqueeze(0))  # CLEAN: no-cudagraphs preview compile
