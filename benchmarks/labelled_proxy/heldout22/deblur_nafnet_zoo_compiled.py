"""NAFNet motion deblurring with an mmediting-style MODELS registry and config, served by a tiled restorer
that keeps a reduce-overhead compiled model on itself (plus a default-mode compile for previews)."""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("restorer")
MODELS = {}

def register(name):
    def deco(fn):
        MODELS[name] = fn
        return fn
    return deco

class SimpleGate(nn.Module):
    def forward(self, x):
        a, b = x.chunk(2, dim=1)
        return a * b

class NAFBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm1, self.norm2 = nn.GroupNorm(1, c), nn.GroupNorm(1, c)
        self.conv1, self.dw = nn.Conv2d(c, 2 * c, 1), nn.Conv2d(2 * c, 2 * c, 3, padding=1, groups=2 * c)
        self.sca = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, c, 1))
        self.conv3, self.gate = nn.Conv2d(c, c, 1), SimpleGate()
        self.ffn = nn.Sequential(nn.Conv2d(c, 2 * c, 1), SimpleGate(), nn.Conv2d(c, c, 1))
        self.beta = nn.Parameter(torch.zeros(1, c, 1, 1))
        self.gamma = nn.Parameter(torch.zeros(1, c, 1, 1))

    def forward(self, x):
        y = self.gate(self.dw(self.conv1(self.norm1(x))))
        x = x + self.beta * self.conv3(y * self.sca(y))
        return x + self.gamma * self.ffn(self.norm2(x))

class NAFNet(nn.Module):
    def __init__(self, width=32, n_blocks=8):
        super().__init__()
        self.intro = nn.Conv2d(3, width, 3, padding=1)
        self.body = nn.Sequential(*[NAFBlock(width) for _ in range(n_blocks)])
        self.ending = nn.Conv2d(width, 3, 3, padding=1)

    def forward(self, x):
        if x.amax() > 1.5:  # HAZARD: dynamic-control-flow
            x = x / 255.0
        res = self.ending(self.body(self.intro(x)))
        log.debug("residual energy %s", res.pow(2).mean())  # HAZARD: host-code
        return x + res

@register("NAFNet-GoPro-width32")
def nafnet_w32():
    return NAFNet(width=32, n_blocks=8)

@register("NAFNet-GoPro-width64")
def nafnet_w64():
    return NAFNet(width=64, n_blocks=16)

class TiledRestorer:
    def __init__(self, cfg):
        model = MODELS[cfg["type"]]().cuda().eval()
        self.model = torch.compile(model, mode="reduce-overhead")
        self.preview = torch.compile(model)
        self.tile, self.overlap = cfg["tile"], cfg["overlap"]

    @torch.no_grad()
    def restore(self, img):
        _, _, H, W = img.shape
        stride = self.tile - self.overlap
        tiles = []
        for y in range(0, H - self.overlap, stride):
            for x in range(0, W - self.overlap, stride):
                pred = self.model(img[:, :, y:y + self.tile, x:x + self.tile])  # HAZARD: dynamic-shape
                tiles.append((y, x, pred))  # HAZARD: static-address
        return self._blend(img, tiles)

    @torch.no_grad()
    def restore_padded(self, img):
        _, _, H, W = img.shape
        stride = self.tile - self.overlap
        ph, pw = (-(H - self.overlap)) % stride, (-(W - self.overlap)) % stride
        padded = F.pad(img, (0, pw, 0, ph), mode="reflect")
        tiles = []
        for y in range(0, H + ph - self.overlap, stride):
            for x in range(0, W + pw - self.overlap, stride):
                pred = self.model(padded[:, :, y:y + self.tile, x:x + self.tile])  # CLEAN: every tile has the same shape
                tiles.append((y, x, pred.clone()))  # CLEAN: cloned before the next replay
        return self._blend(padded, tiles)[:, :, :H, :W]

    def _blend(self, img, tiles):
        out, weight = torch.zeros_like(img), torch.zeros_like(img[:, :1])
        for y, x, pred in tiles:
            h, w = pred.shape[-2:]
            out[:, :, y:y + h, x:x + w] += pred
            weight[:, :, y:y + h, x:x + w] += 1
        return out / weight.clamp_min(1)

    @torch.no_grad()
    def thumbnail(self, img):
        return self.preview(F.interpolate(img, size=(256, 256), mode="area"))  # CLEAN: default-mode compile, no CUDA graphs

if __name__ == "__main__":
    restorer = TiledRestorer(dict(type="NAFNet-GoPro-width32", tile=256, overlap=32))
    photo = torch.rand(1, 3, 720, 1280, device="cuda")
    sharp = restorer.restore(photo)
    sharp_padded = restorer.restore_padded(photo)
    thumb = restorer.thumbnail(photo)
