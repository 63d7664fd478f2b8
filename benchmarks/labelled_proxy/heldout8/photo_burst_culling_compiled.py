"""Burst culling in a phone gallery app.

For every burst the app picks the keeper: a small CNN predicts an aesthetic
score, a motion-blur score and an eyes-closed probability per frame.  Live
capture culls each burst as it lands; library import culls in fixed batches.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
LIB_BATCH = 24


class CullNet(nn.Module):
    def __init__(self, w=48):
        super().__init__()
        layers, c = [], 3
        for i in range(5):
            layers += [nn.Conv2d(c, w * 2 ** min(i, 3), 3, 2, 1), nn.BatchNorm2d(w * 2 ** min(i, 3)), nn.ReLU()]
            c = w * 2 ** min(i, 3)
        self.body = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.heads = nn.Linear(c, 3)

    def forward(self, x):
        a, b, e = self.heads(self.body(x)).unbind(-1)
        return a, torch.sigmoid(b), torch.sigmoid(e)


@torch.compile(mode="max-autotune")
def normalize_(imgs, mean, std):
    imgs.sub_(mean).div_(std)  # HAZARD: static-address
    return imgs


@torch.compile(mode="max-autotune")
def score_frames(model, imgs):
    started = time.perf_counter()  # HAZARD: host-code
    aes, blur, eyes = model(imgs)
    quality = aes - 2.0 * blur
    quality = torch.where(eyes > 0.5, quality - 10.0, quality)  # CLEAN: branch-free penalty
    best = quality.argmax().item()  # HAZARD: host-sync
    return quality, best, started


def _export(quality, valid):
    q = torch.where(valid, quality, torch.full_like(quality, float("nan")))
    return q.tolist()  # CLEAN: compiled without CUDA graphs


export = torch.compile(_export, mode="max-autotune-no-cudagraphs")


class Culler:
    def __init__(self):
        self.model = CullNet().cuda().eval()
        self.mean, self.std = MEAN.cuda(), STD.cuda()

    def load(self, frames_u8):
        x = frames_u8.cuda(non_blocking=True).float().div_(255)
        x = F.interpolate(x, size=(320, 320), mode="bilinear", antialias=True)
        return normalize_(x, self.mean, self.std)

    @torch.inference_mode()
    def cull_burst_live(self, frames_u8):
        x = self.load(frames_u8)
        quality, best, _ = score_frames(self.model, x)  # HAZARD: dynamic-shape
        return best, quality.clone()

    @torch.inference_mode()
    def cull_library(self, bursts):
        picks = []
        for burst in bursts:
            n = burst.shape[0]
            x = self.load(burst[:LIB_BATCH])
            x = F.pad(x, (0, 0, 0, 0, 0, 0, 0, LIB_BATCH - x.shape[0]))
            quality, _, _ = score_frames(self.model, x)  # CLEAN: always LIB_BATCH frames
            valid = torch.arange(LIB_BATCH, device="cuda") < n
            scores = export(quality, valid)
            picks.append(max(range(min(n, LIB_BATCH)), key=lambda i: scores[i]))
        return picks


if __name__ == "__main__":
    c = Culler()
    bursts = [torch.randint(0, 255, (int(n), 3, 480, 640), dtype=torch.uint8).pin_memory()
              for n in torch.randint(3, 20, (12,))]
    for b in bursts[:4]:
        print(c.cull_burst_live(b)[0])
    print(c.cull_library(bursts))
