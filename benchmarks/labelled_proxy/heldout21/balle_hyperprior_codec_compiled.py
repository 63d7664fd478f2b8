"""Scale-hyperprior image codec (Balle et al. 2018): rate-distortion training over a lambda
sweep, then Kodak evaluation. The trainer is built from a dataclass config; the compiled
paths replace the CompressAI-style eager loop (range coding itself stays eager elsewhere)."""
import dataclasses
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from codec_data import load_kodak, vimeo_crops


@dataclasses.dataclass
class CodecCfg:
    N: int = 128
    M: int = 192
    lmbda: float = 0.0130
    lr: float = 1e-4
    compile_mode: str = "reduce-overhead"


class GDN(nn.Module):
    def __init__(self, ch, inverse=False):
        super().__init__()
        self.inverse, self.beta = inverse, nn.Parameter(torch.ones(ch))
        self.gamma = nn.Parameter(0.1 * torch.eye(ch).view(ch, ch, 1, 1))

    def forward(self, x):
        norm = torch.sqrt(F.conv2d(x * x, self.gamma.abs(), self.beta.abs()))
        return x * norm if self.inverse else x / norm


def likelihood(v, scale):
    cdf = lambda t: 0.5 * torch.erfc(-t / (scale * math.sqrt(2)))
    return (cdf(v + 0.5) - cdf(v - 0.5)).clamp_min(1e-9)


class Hyperprior(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        N, M = cfg.N, cfg.M
        conv = lambda cin, cout, k=5, s=2: nn.Conv2d(cin, cout, k, s, k // 2)
        deconv = lambda cin, cout: nn.ConvTranspose2d(cin, cout, 5, 2, 2, 1)
        self.g_a = nn.Sequential(conv(3, N), GDN(N), conv(N, N), GDN(N), conv(N, N), GDN(N), conv(N, M))
        self.g_s = nn.Sequential(deconv(M, N), GDN(N, True), deconv(N, N), GDN(N, True), deconv(N, N), GDN(N, True), deconv(N, 3))
        self.h_a = nn.Sequential(conv(M, N, 3, 1), nn.ReLU(), conv(N, N), nn.ReLU(), conv(N, N))
        self.h_s = nn.Sequential(deconv(N, N), nn.ReLU(), deconv(N, N), nn.ReLU(), conv(N, M, 3, 1))
        self.z_logscale = nn.Parameter(torch.zeros(1, N, 1, 1))
        self.register_buffer("medians", torch.zeros(1, N, 1, 1))

    def quantize(self, x, medians):
        return x + torch.empty_like(x).uniform_(-0.5, 0.5) if self.training else torch.round(x - medians) + medians

    def forward(self, x):
        y = self.g_a(x)
        z_hat = self.quantize(self.h_a(y.abs()), self.medians)
        scales = F.softplus(self.h_s(z_hat)).clamp_min(0.11)
        y_hat = self.quantize(y, 0.0)
        return self.g_s(y_hat), likelihood(y_hat, scales), likelihood(z_hat - self.medians, self.z_logscale.exp())


class Trainer:
    def __init__(self, cfg: CodecCfg):
        self.cfg = cfg
        self.model = Hyperprior(cfg).cuda()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=cfg.lr)
        self.loss_fn, self.bpp_fn = (torch.compile(f, mode=cfg.compile_mode) for f in (self._rd_loss, self._bpp))

    def _rd_loss(self, x):
        x_hat, ly, lz = self.model(x)
        bpp = (-torch.log2(ly).sum() - torch.log2(lz).sum()) / (x.shape[0] * x.shape[2] * x.shape[3])
        lam = self.cfg.lmbda  # HAZARD: python-scalar
        return lam * 255 ** 2 * F.mse_loss(x_hat, x) + bpp

    @torch.no_grad()
    def _bpp(self, x):
        x_hat, ly, lz = self.model(x)
        bits = -torch.log2(ly).sum() - torch.log2(lz).sum()
        return bits.item() / (x.shape[2] * x.shape[3]), F.mse_loss(x_hat.clamp(0, 1), x)  # HAZARD: host-sync

    def train(self, loader, epochs):
        self.model.train()
        for ep in range(epochs):
            for x in loader:                                   # 256x256 random crops, batch 16, drop_last=True
                x = x.cuda(non_blocking=True)
                loss = self.loss_fn(x)  # CLEAN: fixed crop and batch size, one graph
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
            with torch.no_grad():                               # z medians from the last batch, eager
                z = self.model.h_a(self.model.g_a(x).abs()).transpose(0, 1).flatten(1)
            self.model.medians = z.median(dim=1).values.view(1, -1, 1, 1)  # HAZARD: static-address

    def kodak(self, images):
        self.model.eval()
        res = []
        for img in images:                                    # 24 images, 768x512 and 512x768
            bpp, mse = self.bpp_fn(img.cuda())  # HAZARD: dynamic-shape
            res.append((bpp, -10 * math.log10(mse.item())))  # CLEAN: host read right after the call, before the next one
        return res


if __name__ == "__main__":
    cfg = CodecCfg()
    tr = Trainer(cfg)
    for lmbda in (0.0018, 0.0035, 0.0067, 0.0130):
        cfg.lmbda = lmbda
        tr.train(vimeo_crops("vimeo_septuplet", crop=256, batch=16), epochs=5)
        torch.save(tr.model.state_dict(), f"hyperprior_{lmbda}.pt")
        print(lmbda, tr.kodak(load_kodak("kodak/")))
