"""Image harmonization service for a photo-compositing editor (composite + foreground mask -> harmonized
image, iDIH-style encoder-decoder with foreground/background statistics). A @cuda_graphed decorator
captures the bound method on its first call and replays afterwards."""
import functools

import torch
import torch.nn as nn
import torch.nn.functional as F

def cuda_graphed(fn):
    state = {}

    @functools.wraps(fn)
    def wrapper(self, *args):
        if "graph" not in state:
            state["inputs"] = [a.clone() for a in args]
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):  # HAZARD: api-misuse
                state["out"] = fn(self, *state["inputs"])
            state["graph"] = g
        for dst, src in zip(state["inputs"], args):
            dst.copy_(src)  # CLEAN: copy_ into the captured inputs
        state["graph"].replay()
        return state["out"]
    return wrapper

class ConvBlock(nn.Sequential):
    def __init__(self, a, b, stride=1):
        super().__init__(nn.Conv2d(a, b, 3, stride, 1), nn.InstanceNorm2d(b, affine=True), nn.ELU())

class Harmonizer(nn.Module):
    def __init__(self, c=32, dither_std=1.0 / 255, seed=0):
        super().__init__()
        self.enc = nn.Sequential(ConvBlock(4 + 6, c, 2), ConvBlock(c, 2 * c, 2), ConvBlock(2 * c, 4 * c, 2))
        self.dec = nn.Sequential(nn.Upsample(scale_factor=8, mode="bilinear"), ConvBlock(4 * c, c), nn.Conv2d(c, 3, 1))
        self.dither_std = dither_std
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(seed)

    def forward(self, comp, mask):
        area = mask.sum((2, 3), keepdim=True).clamp_min(1.0)
        fg_mean = (comp * mask).sum((2, 3), keepdim=True) / area  # CLEAN: masked mean without boolean indexing
        bg_mean = (comp * (1 - mask)).sum((2, 3), keepdim=True) / (1 - mask).sum((2, 3), keepdim=True).clamp_min(1.0)
        x = torch.cat([comp, mask, fg_mean.expand_as(comp), bg_mean.expand_as(comp)], 1)
        x = x + self.dither_std * torch.randn(x.shape, device=x.device, generator=self.gen)  # HAZARD: rng
        return comp + self.dec(self.enc(x)) * mask

class HarmonizationService:
    def __init__(self, model):
        self.model = model.cuda().eval()
        self.blend_alpha = 1.0
        self.undo_stack = []

    @cuda_graphed
    @torch.no_grad()
    def _harmonize(self, comp, mask):
        out = self.model(comp, mask)
        alpha = self.blend_alpha  # HAZARD: python-scalar
        return torch.lerp(comp, out, alpha * mask)

    def set_blend(self, slider_value):
        self.blend_alpha = slider_value / 100.0

    def harmonize(self, comp, mask):
        out = self._harmonize(comp, mask)
        self.undo_stack.append(out)  # HAZARD: static-address
        return out

    def export(self, comp, mask):
        return self._harmonize(comp, mask).clone()  # CLEAN: cloned before the next replay

def load_layer(h=512, w=512):
    comp = torch.rand(1, 3, h, w, device="cuda")
    mask = torch.zeros(1, 1, h, w, device="cuda")
    mask[..., 128:384, 160:352] = 1.0
    return comp, mask

if __name__ == "__main__":
    svc = HarmonizationService(Harmonizer())
    for step, slider in enumerate((100, 80, 55, 100)):
        svc.set_blend(slider)
        comp, mask = load_layer()
        preview = svc.harmonize(comp, mask)
    final = svc.export(*load_layer())
    previews = torch.cat(svc.undo_stack)
