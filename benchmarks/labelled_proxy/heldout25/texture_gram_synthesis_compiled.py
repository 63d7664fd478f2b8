"""Tileable texture synthesis for the level artists (Gatys et al. Gram-matrix matching).

The artist drops an exemplar (bark, rock, moss ...) and gets a seamless 512x512 tile:
the image itself is the parameter, optimised with Adam against VGG Gram matrices, with
circular padding for tileability. Loss and optimizer step are compiled.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

LAYERS = (1, 6, 11, 20, 29)


class VGGFeatures(nn.Module):
    def __init__(self):
        super().__init__()
        vgg = torchvision.models.vgg19(weights="IMAGENET1K_V1").features[:30].eval()
        for m in vgg:
            if isinstance(m, nn.Conv2d):
                m.padding_mode = "circular"
            if isinstance(m, nn.MaxPool2d):
                vgg._modules[str(list(vgg).index(m))] = nn.AvgPool2d(2)
        self.vgg = vgg.requires_grad_(False)
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))

    def forward(self, x):
        feats, h = [], (x - self.mean) / self.std
        for i, layer in enumerate(self.vgg):
            h = layer(h)
            if i in LAYERS:
                feats.append(h)
        return feats


def gram(f):
    b, c, hw = f.shape[0], f.shape[1], f.shape[2] * f.shape[3]
    f = f.reshape(b, c, hw)
    return f @ f.transpose(1, 2) / hw


class TextureSynth:
    def __init__(self, exemplar, size=512, lr=0.02):
        self.net = VGGFeatures().cuda()
        with torch.no_grad():
            self.targets = [gram(f) for f in self.net(exemplar.cuda())]
        self.image = nn.Parameter(torch.rand(1, 3, size, size, device="cuda"))
        self.verbose = True
        self.tick_times = []
        self.opt = torch.optim.Adam([self.image], lr=lr)
        self.tv_weight = 1e-3
        self.loss = torch.compile(self._loss, mode="reduce-overhead")
        self.step = torch.compile(self.opt.step, mode="reduce-overhead")
        self.eval_targets = torch.compile(self._loss, mode="max-autotune-no-cudagraphs")

    def _report(self, loss):
        if self.verbose:
            print(f"[texsynth] style loss {loss.item():.4e}")  # HAZARD: host-sync

    def _loss(self):
        self.tick_times.append(time.perf_counter())  # HAZARD: host-code
        feats = self.net(self.image)
        style = sum(F.mse_loss(gram(f), t) for f, t in zip(feats, self.targets))
        img = self.image
        tv = (img - img.roll(1, 2)).abs().mean() + (img - img.roll(1, 3)).abs().mean()  # CLEAN: roll keeps shapes static
        loss = style + self.tv_weight * tv  # HAZARD: python-scalar
        self._report(style)
        return loss

    def run(self, iters=1500):
        for it in range(iters):
            if it in (500, 1000):
                self.tv_weight *= 0.3
                for g in self.opt.param_groups:
                    g["lr"] *= 0.5  # HAZARD: optimizer
            loss = self.loss()
            loss.backward()
            self.step()
            self.opt.zero_grad(set_to_none=False)
            with torch.no_grad():
                self.image.clamp_(0.0, 1.0)  # CLEAN: eager in-place clamp of the parameter, outside the compiled functions
        self.verbose = False
        final = self.eval_targets()  # CLEAN: max-autotune-no-cudagraphs twin, no CUDA graph
        return self.image.detach().clone(), final.item()
