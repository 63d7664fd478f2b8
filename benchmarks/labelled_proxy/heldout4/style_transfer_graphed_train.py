"""Fast neural style transfer: the image transformation net is graphed, VGG perceptual loss stays eager.

Style images are blended per sample with a mixing weight, so one network learns
a continuum between the content image and the target style.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class ResidualIN(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.c1, self.n1 = nn.Conv2d(ch, ch, 3), nn.InstanceNorm2d(ch, affine=True)
        self.c2, self.n2 = nn.Conv2d(ch, ch, 3), nn.InstanceNorm2d(ch, affine=True)

    def forward(self, x):
        y = F.relu(self.n1(self.c1(F.pad(x, (1, 1, 1, 1), mode="reflect"))))  # CLEAN: padding widths are constant Python ints
        return x + self.n2(self.c2(F.pad(y, (1, 1, 1, 1), mode="reflect")))


class TransformNet(nn.Module):
    def __init__(self, n_res=5):
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(3, 32, 9, padding=4), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU(),
                                  nn.Conv2d(64, 128, 3, 2, 1), nn.ReLU())
        self.res = nn.Sequential(*[ResidualIN(128) for _ in range(n_res)])
        self.up = nn.Sequential(nn.Upsample(scale_factor=2), nn.Conv2d(128, 64, 3, padding=1), nn.ReLU(),
                                nn.Upsample(scale_factor=2), nn.Conv2d(64, 32, 3, padding=1), nn.ReLU(),
                                nn.Conv2d(32, 3, 9, padding=4))
        self.last_forward_t = 0.0

    def forward(self, x, mix):
        if (x.amax() - x.amin()) < 0.05:  # HAZARD: dynamic-control-flow
            x = (x - x.amin()) / (x.amax() - x.amin() + 1e-6)
        y = self.up(self.res(self.down(x)))
        y = mix * torch.sigmoid(y) + (1.0 - mix) * x
        assert torch.isfinite(y).all(), "non-finite stylized output"  # HAZARD: host-sync
        self.last_forward_t = time.perf_counter()  # HAZARD: host-code
        return y


def gram(f):
    b, c, h, w = f.shape
    f = f.flatten(2)
    return f @ f.transpose(1, 2) / (c * h * w)


def build(batch=8, size=256):
    net = TransformNet().cuda().train()
    sample = (torch.rand(batch, 3, size, size, device="cuda"), torch.rand(batch, 1, 1, 1, device="cuda"))
    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: autocast cache disabled while graphing
        gnet = torch.cuda.make_graphed_callables(net, sample, num_warmup_iters=3)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, fused=True)
    return net, gnet, opt


def train(gnet, opt, vgg_feats, style_grams, loader, style_w=1e5, content_w=1.0):
    for content in loader:
        content = content.cuda(non_blocking=True)
        mix = torch.rand(content.shape[0], 1, 1, 1, device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            out = gnet(content, mix=mix)  # HAZARD: api-misuse
        fo, fc = vgg_feats(out), vgg_feats(content)
        c_loss = F.mse_loss(fo[2], fc[2])
        s_loss = sum(F.mse_loss(gram(a), g.expand(a.shape[0], -1, -1)) for a, g in zip(fo, style_grams))
        loss = content_w * c_loss + style_w * (mix.mean() * s_loss)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()  # CLEAN: fused Adam runs eagerly, outside the graphed network
