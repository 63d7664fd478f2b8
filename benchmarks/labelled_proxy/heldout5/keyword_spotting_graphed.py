"""Keyword spotting (BC-ResNet-lite on log-mel) trained with torch.cuda.make_graphed_callables.

SpecAugment, the backbone and the keyword head are graphed together and share one pool.
"""
import random
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchaudio

KEYWORDS = ["yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go"]
N_CLASSES = len(KEYWORDS) + 2  # + silence, unknown


class SpecAugment(nn.Module):
    def __init__(self, time_mask=20, freq_mask=8, noise_seed=17):
        super().__init__()
        self.time_mask, self.freq_mask = time_mask, freq_mask
        self.noise_gen = torch.Generator(device="cuda")
        self.noise_gen.manual_seed(noise_seed)

    def forward(self, mel):  # (B, 1, F, T)
        T = mel.shape[-1]
        t0 = random.randint(0, T - self.time_mask)  # HAZARD: host-code
        mel = torch.cat([mel[..., :t0], torch.zeros_like(mel[..., t0:t0 + self.time_mask]), mel[..., t0 + self.time_mask:]], -1)
        f = torch.arange(mel.shape[-2], device=mel.device)[:, None]
        f0 = torch.randint(0, mel.shape[-2] - self.freq_mask, (mel.shape[0], 1, 1, 1), device=mel.device)  # CLEAN: mask offset drawn on the device
        mel = mel.masked_fill((f >= f0) & (f < f0 + self.freq_mask), 0.0)
        noise = torch.randn(mel.shape, device=mel.device, generator=self.noise_gen)  # HAZARD: rng
        return mel + 0.01 * noise


class BCResNetLite(nn.Module):
    def __init__(self, c=32):
        super().__init__()
        self.stem = nn.Conv2d(1, c, 5, stride=(2, 1), padding=2)
        self.blocks = nn.Sequential(*[nn.Sequential(nn.Conv2d(c, c, 3, padding=1, groups=c), nn.BatchNorm2d(c),
                                                    nn.SiLU(), nn.Conv2d(c, c, 1)) for _ in range(6)])
        self.head = nn.Conv2d(c, N_CLASSES, 1)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x))).mean((2, 3))


class KeywordHead(nn.Module):
    def __init__(self, keyword_ids, filler_ids):
        super().__init__()
        self.keyword_ids = keyword_ids  # positions of the deployed keywords in the 12-way output
        self.register_buffer("filler_idx", torch.tensor(filler_ids))
        self.temp = nn.Parameter(torch.ones(()))

    def forward(self, logits):
        kw = logits[:, self.keyword_ids]  # HAZARD: host-sync
        filler = logits.index_select(1, self.filler_idx)  # CLEAN: index tensor kept in a registered buffer
        return torch.cat([kw, filler.logsumexp(1, keepdim=True)], 1) / self.temp


def build(batch=128, n_mels=40, frames=101):
    aug, net = SpecAugment().cuda(), BCResNetLite().cuda()
    head = KeywordHead(list(range(len(KEYWORDS))), [10, 11]).cuda()
    x = torch.randn(batch, 1, n_mels, frames, device="cuda")
    xa = torch.randn(batch, 1, n_mels, frames, device="cuda")
    lg = torch.randn(batch, N_CLASSES, device="cuda", requires_grad=True)
    with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        aug, net, head = torch.cuda.make_graphed_callables((aug, net, head), ((x,), (xa,), (lg,)))
    return aug, net, head


def train(loader, epochs=30):
    mel = torchaudio.transforms.MelSpectrogram(16000, n_fft=480, hop_length=160, n_mels=40).cuda()
    aug, net, head = build()
    opt = torch.optim.SGD(list(net.parameters()) + list(head.parameters()), lr=0.1, momentum=0.9, nesterov=True)
    for epoch in range(epochs):
        for wav, label in loader:  # drop_last=True, batch of 128 one-second clips
            x = (mel(wav.cuda(non_blocking=True)) + 1e-6).log().unsqueeze(1)
            with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):  # CLEAN: autocast without the weight cache around graphed calls
                out = head(net(aug(x)))
            loss = F.cross_entropy(out.float(), label.cuda(non_blocking=True).clamp(max=len(KEYWORDS)))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")  # CLEAN: .item() outside the graphed callables
