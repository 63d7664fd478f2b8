"""Spoken language identification (VoxLingua107) with an ECAPA-TDNN embedding model.

Service code; the assistant added `model.forward = torch.compile(model.forward, mode="max-autotune")`
and a per-customer enrollment cache of language centroids.
"""
import logging
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchaudio

log = logging.getLogger("lid")
CROP = 300  # 3 s of 10 ms fbank frames


class SERes2Block(nn.Module):
    def __init__(self, c, k=3, d=2, scale=8):
        super().__init__()
        self.scale = scale
        self.pre = nn.Sequential(nn.Conv1d(c, c, 1), nn.ReLU(), nn.BatchNorm1d(c))
        self.convs = nn.ModuleList(nn.Sequential(nn.Conv1d(c // scale, c // scale, k, dilation=d, padding=d), nn.ReLU(), nn.BatchNorm1d(c // scale)) for _ in range(scale - 1))
        self.post = nn.Sequential(nn.Conv1d(c, c, 1), nn.ReLU(), nn.BatchNorm1d(c))
        self.se = nn.Sequential(nn.AdaptiveAvgPool1d(1), nn.Conv1d(c, 128, 1), nn.ReLU(), nn.Conv1d(128, c, 1), nn.Sigmoid())

    def forward(self, x):
        parts = self.pre(x).chunk(self.scale, 1)
        ys, y = [parts[0]], None
        for conv, p in zip(self.convs, parts[1:]):
            y = conv(p if y is None else p + y)
            ys.append(y)
        h = self.post(torch.cat(ys, 1))
        return x + h * self.se(h)


class ECAPA(nn.Module):
    def __init__(self, c=512, emb=192, n_langs=107, labels=None):
        super().__init__()
        self.labels = labels or [f"lang{i}" for i in range(n_langs)]
        self.stem = nn.Sequential(nn.Conv1d(80, c, 5, padding=2), nn.ReLU(), nn.BatchNorm1d(c))
        self.blocks = nn.ModuleList(SERes2Block(c, d=d) for d in (2, 3, 4))
        self.mfa = nn.Conv1d(3 * c, 1536, 1)
        self.att = nn.Sequential(nn.Conv1d(1536, 128, 1), nn.Tanh(), nn.Conv1d(128, 1536, 1))
        self.emb = nn.Sequential(nn.BatchNorm1d(3072), nn.Linear(3072, emb))
        self.cls = nn.Linear(emb, n_langs)

    def forward(self, fbank):  # (B, 80, T)
        log.info("LID batch %s energy %s", tuple(fbank.shape), fbank.mean())  # HAZARD: host-code
        self.last_call = time.monotonic()  # HAZARD: host-code
        x = self.stem(fbank - fbank.mean(-1, keepdim=True))
        outs = []
        for blk in self.blocks:
            x = blk(x)
            outs.append(x)
        h = F.relu(self.mfa(torch.cat(outs, 1)))
        w = F.softmax(self.att(h), dim=-1)  # CLEAN: attentive pooling on fixed shapes
        mu = (h * w).sum(-1)
        sd = ((h * h * w).sum(-1) - mu * mu).clamp_min(1e-5).sqrt()
        e = self.emb(torch.cat([mu, sd], 1))
        logits = self.cls(e)
        top = self.labels[int(logits[0].argmax())]  # HAZARD: host-sync
        return e, logits, top


class LIDService:
    def __init__(self, model):
        self.model = model.cuda().eval()
        self.model.forward = torch.compile(self.model.forward, mode="max-autotune")
        self.fbank = torchaudio.compliance.kaldi.fbank
        self.enrolled = {}

    def features(self, wav):
        return self.fbank(wav.unsqueeze(0), num_mel_bins=80, sample_frequency=16000).T.unsqueeze(0).cuda()

    @torch.no_grad()
    def identify(self, wav):
        feats = self.features(wav)
        e, logits, top = self.model(feats)  # HAZARD: dynamic-shape
        return top, F.softmax(logits, -1).cpu()

    @torch.no_grad()
    def identify_cropped(self, wav):
        feats = self.features(wav)
        feats = F.pad(feats, (0, max(0, CROP - feats.shape[-1])))[..., :CROP]
        e, logits, top = self.model(feats)  # CLEAN: fixed 3 s crop, one graph
        return top, F.softmax(logits, -1).cpu()  # CLEAN: host copy right after the call

    @torch.no_grad()
    def enroll(self, customer, lang, wavs):
        embs = []
        for w in wavs:
            feats = F.pad(self.features(w), (0, CROP))[..., :CROP]
            e, _, _ = self.model(feats)
            embs.append(e.clone())  # CLEAN: cloned before the next call
        self.enrolled[(customer, lang)] = torch.cat(embs).mean(0, keepdim=True)

    @torch.no_grad()
    def verify_dialect(self, customer, wav):
        feats = F.pad(self.features(wav), (0, CROP))[..., :CROP]
        e, _, top = self.model(feats)
        self.enrolled[(customer, "last")] = e.clone()  # CLEAN: cloned before it is kept across calls
        refs = {k: v for k, v in self.enrolled.items() if k[0] == customer and k[1] != "last"}
        return {k[1]: F.cosine_similarity(e, v).item() for k, v in refs.items()}
