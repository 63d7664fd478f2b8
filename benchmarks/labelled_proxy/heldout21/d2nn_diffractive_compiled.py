"""Diffractive deep neural network (D2NN) for MNIST, simulated at three THz wavelengths so the
3D-printed phase masks tolerate source drift. Free-space propagation uses a truncated
Rayleigh-Sommerfeld kernel applied as real/imaginary convolutions.

Training script from the optics group; the `model.forward = torch.compile(...)` line was
added by a coding assistant ("make the propagation faster").
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

NPIX, PITCH, DIST, LAYERS, KS = 200, 400e-6, 0.03, 5, 31
WAVELENGTHS = (0.70e-3, 0.75e-3, 0.80e-3)


def detector_masks():
    m = torch.zeros(10, NPIX, NPIX)
    for c in range(10):
        r, q = divmod(c, 4)
        m[c, 40 + 45 * r: 60 + 45 * r, 30 + 40 * q: 50 + 40 * q] = 1.0
    return m


def _normalize_(x):
    return x.div_(x.amax(dim=(-2, -1), keepdim=True).clamp_min(1e-6))  # HAZARD: static-address


normalize_ = torch.compile(_normalize_, mode="max-autotune")


def propagate(ur, ui, hr, hi):
    conv = lambda a, k: F.conv2d(a, k, padding=KS // 2)
    return conv(ur, hr) - conv(ui, hi), conv(ur, hi) + conv(ui, hr)


class D2NN(nn.Module):
    def __init__(self):
        super().__init__()
        self.phase = nn.Parameter(torch.rand(LAYERS, NPIX, NPIX) * 2 * math.pi)
        g = (torch.arange(KS) - KS // 2) * PITCH
        self.register_buffer("r2", (g[:, None] ** 2 + g[None, :] ** 2 + DIST ** 2).view(1, 1, KS, KS))
        self.register_buffer("det", detector_masks())
        self.wavelength = WAVELENGTHS[1]

    def kernel(self):
        lam = self.wavelength  # HAZARD: python-scalar
        r = self.r2.sqrt()
        amp = DIST * PITCH ** 2 / (lam * self.r2)
        k = 2 * math.pi / lam
        return amp * torch.sin(k * r), -amp * torch.cos(k * r)

    def forward(self, img):                                # (B, NPIX, NPIX) amplitude
        print("mean input energy", img.pow(2).mean())  # HAZARD: host-code
        hr, hi = self.kernel()
        ur, ui = img[:, None], torch.zeros_like(img[:, None])
        for l in range(LAYERS):
            ur, ui = propagate(ur, ui, hr, hi)
            c, s = torch.cos(self.phase[l]), torch.sin(self.phase[l])
            ur, ui = ur * c - ui * s, ur * s + ui * c
        ur, ui = propagate(ur, ui, hr, hi)
        return torch.einsum("bxy,cxy->bc", (ur ** 2 + ui ** 2)[:, 0], self.det)


def upsample(x):
    return F.interpolate(x[:, None], size=(NPIX, NPIX), mode="nearest")[:, 0]


def train(model, loader, epochs=10):
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for ep in range(epochs):
        for step, (x, y) in enumerate(loader):             # batch 64, drop_last=True
            model.wavelength = WAVELENGTHS[step % 3]
            x = normalize_(upsample(x.cuda()))
            scores = model(x)
            loss = F.cross_entropy(scores / scores.sum(1, keepdim=True) * 10, y.cuda())
            running = loss.item()  # CLEAN: read before backward, eager optimizer
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {ep}: last loss {running:.4f}")


@torch.no_grad()
def evaluate(model, loader, wavelength):
    model.wavelength = wavelength
    all_scores, correct = [], 0
    for x, y in loader:                                    # batch 100, 10k test images
        scores = model(normalize_(upsample(x.cuda())))
        correct += (scores.argmax(1).cpu() == y).sum().item()  # CLEAN: host read right after the call, before the next one
        all_scores.append(scores)  # HAZARD: static-address
    return correct / len(loader.dataset), torch.cat(all_scores)


if __name__ == "__main__":
    from torchvision import datasets, transforms

    tf = transforms.ToTensor()
    tr = torch.utils.data.DataLoader(datasets.MNIST("data", True, tf, download=True), 64, shuffle=True, drop_last=True)
    te = torch.utils.data.DataLoader(datasets.MNIST("data", False, tf), 100)
    model = D2NN().cuda()
    model.forward = torch.compile(model.forward, mode="max-autotune")
    tr.dataset.transform = transforms.Compose([tf, transforms.Lambda(lambda t: t[0])])
    te.dataset.transform = tr.dataset.transform
    train(model, tr)
    for lam in WAVELENGTHS:
        acc, _ = evaluate(model, te, lam)
        print(f"lambda {lam * 1e3:.2f} mm: accuracy {acc:.4f}")
