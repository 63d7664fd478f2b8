"""Isolated sign-language recognition from pose keypoints (SPOTER-style, WLASL-2000).

MediaPipe body + hand keypoints are normalised to the signing space and classified by
a small transformer encoder. Training runs a reduce-overhead compiled model and a
compiled optimizer step; evaluation scores whole test clips.
"""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

N_JOINTS, CLIP, N_CLASSES = 54, 64, 2000


class PoseTransformer(nn.Module):
    def __init__(self, d=108, layers=4):
        super().__init__()
        self.embed = nn.Linear(N_JOINTS * 2, d)
        self.pos = nn.Parameter(torch.zeros(1, 256, d))
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        layer = nn.TransformerEncoderLayer(d, 9, 4 * d, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d, N_CLASSES)

    def forward(self, kp):
        B, T = kp.shape[:2]
        missing = kp.abs().sum(-1, keepdim=True) == 0
        print("missing-keypoint ratio", missing.float().mean())  # HAZARD: host-code
        centred = kp - kp[:, :, :1]
        kp = torch.where(missing, torch.zeros_like(kp), centred)  # CLEAN: torch.where keeps shapes static
        h = self.embed(kp.flatten(2)) + self.pos[:, :T]
        h = torch.cat([self.cls.expand(B, -1, -1), h], 1)
        return self.head(self.encoder(h)[:, 0])


def resample(kp, n=CLIP):
    idx = torch.linspace(0, kp.shape[1] - 1, n, device=kp.device).round().long()
    return kp[:, idx]


model = PoseTransformer().cuda()
cmodel = torch.compile(model, mode="reduce-overhead")
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.05)


@torch.compile(mode="reduce-overhead")
def opt_step():
    opt.step()


def lr_at(step, total, warm=500, base=3e-4):
    if step < warm:
        return base * step / warm
    return 0.5 * base * (1 + math.cos(math.pi * (step - warm) / (total - warm)))


def train(loader, total_steps):
    model.train()
    for step, (kp, label) in enumerate(loader):
        logits = cmodel(kp)  # CLEAN: the loader samples every clip to CLIP frames
        loss = F.cross_entropy(logits, label, label_smoothing=0.1)
        loss.backward()
        opt_step()
        opt.zero_grad(set_to_none=True)
        for group in opt.param_groups:
            group["lr"] = lr_at(step, total_steps)  # HAZARD: optimizer
        if step == total_steps:
            break


@torch.no_grad()
def evaluate(test_clips, labels):
    model.eval()
    full, sampled = [], []
    for kp in test_clips:
        logits = cmodel(kp)  # HAZARD: dynamic-shape
        full.append(logits)  # HAZARD: static-address
        sampled.append(cmodel(resample(kp)).clone())  # CLEAN: fixed length and cloned before the next call
    top1_full = (torch.cat(full).argmax(-1) == labels).float().mean()
    top1_sampled = (torch.cat(sampled).argmax(-1) == labels).float().mean()
    return top1_full.item(), top1_sampled.item()


if __name__ == "__main__":
    def fake_loader(n=1000, bs=32):
        for _ in range(n):
            yield torch.randn(bs, CLIP, N_JOINTS, 2, device="cuda"), torch.randint(0, N_CLASSES, (bs,), device="cuda")

    train(fake_loader(), total_steps=999)
    clips = [torch.randn(1, int(t), N_JOINTS, 2, device="cuda") for t in torch.randint(40, 200, (50,))]
    print(evaluate(clips, torch.randint(0, N_CLASSES, (50,), device="cuda")))
