"""Mood/theme auto-tagging for a music streaming catalogue (MTG-Jamendo style).

Log-mel patches go through an augmenting front-end (loudness EQ, random gain,
SpecAugment frequency mask) and a short-chunk CNN tagger with 56 sigmoid
outputs.  Front-end and tagger are graphed together for training.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

N_MELS, FRAMES, N_TAGS = 128, 256, 56


class MelFrontend(nn.Module):
    def __init__(self, eq_curve: np.ndarray):
        super().__init__()
        self.eq_np = eq_curve.astype(np.float32)       # K-weighting per mel bin, from the loudness spec
        self.mask_width = 8
        self.stem = nn.Sequential(nn.Conv2d(1, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU())

    def forward(self, mel):
        eq = torch.from_numpy(self.eq_np).to(mel.device, non_blocking=True)  # HAZARD: pinned-memory
        x = mel + eq.view(1, 1, -1, 1)
        if self.training:
            x = x + np.random.uniform(-0.6, 0.6)  # HAZARD: host-code
            w = self.mask_width  # HAZARD: python-scalar
            f0 = torch.randint(0, N_MELS - w, (x.shape[0], 1, 1, 1), device=x.device)
            bins = torch.arange(N_MELS, device=x.device).view(1, 1, -1, 1)
            x = x.masked_fill((bins >= f0) & (bins < f0 + w), 0.0)  # CLEAN: masked_fill keeps the shape
        return self.stem(x)


class ShortChunkTagger(nn.Module):
    def __init__(self):
        super().__init__()
        chans = [64, 128, 128, 256, 256, 512]
        self.blocks = nn.Sequential(*[
            nn.Sequential(nn.Conv2d(a, b, 3, padding=1), nn.BatchNorm2d(b), nn.ReLU(), nn.MaxPool2d(2))
            for a, b in zip(chans[:-1], chans[1:])])
        self.fc = nn.Linear(512, N_TAGS)

    def forward(self, feats):
        h = self.blocks(feats).amax(dim=(2, 3))
        return self.fc(F.dropout(h, 0.5, self.training))


def build(batch=32):
    eq = 1.0 - np.linspace(0, 1, N_MELS) ** 2 * 0.3
    frontend, tagger = MelFrontend(eq).cuda(), ShortChunkTagger().cuda()
    mel = torch.randn(batch, 1, N_MELS, FRAMES, device="cuda")
    feats = torch.randn(batch, 64, N_MELS, FRAMES, device="cuda", requires_grad=True)
    frontend_g, tagger_g = torch.cuda.make_graphed_callables((frontend, tagger), ((mel,), (feats,)))
    return frontend_g, tagger_g


def train(loader, val_loader, epochs=30):
    frontend, tagger = build()
    opt = torch.optim.AdamW(list(frontend.parameters()) + list(tagger.parameters()), lr=1e-3)
    for epoch in range(epochs):
        frontend.mask_width = min(27, 8 + 2 * epoch)
        for mel, tags in loader:
            feats = frontend(mel)  # CLEAN: graphed callable called positionally
            logits = tagger(feats=feats)  # HAZARD: api-misuse
            loss = F.binary_cross_entropy_with_logits(logits, tags)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        print(epoch, validate(frontend, tagger, val_loader))


@torch.no_grad()
def validate(frontend, tagger, val_loader):
    frontend.eval()
    tagger.eval()
    ap = []
    for mel, tags in val_loader:
        probs = torch.sigmoid(tagger(frontend(mel)))  # CLEAN: eval mode differs from capture, eager forward runs
        hit = tags.gather(1, probs.topk(5, dim=-1).indices).amax(-1)
        ap.append(hit.float().mean())
    frontend.train()
    tagger.train()
    return torch.stack(ap).mean().item()


if __name__ == "__main__":
    def fake(n):
        return [(torch.randn(32, 1, N_MELS, FRAMES, device="cuda"),
                 (torch.rand(32, N_TAGS, device="cuda") > 0.95).float()) for _ in range(n)]
    train(fake(50), fake(5))
