# 3D U-Net for BraTS glioma segmentation (2018 challenge code, NumPy augmentation, soft Dice). The
# network runs under mode="reduce-overhead"; augmentation and loss are compiled with triton.cudagraphs.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CG = {"triton.cudagraphs": True}
N_CLASSES = 4


def block(cin, cout):
    return nn.Sequential(nn.Conv3d(cin, cout, 3, padding=1), nn.InstanceNorm3d(cout), nn.LeakyReLU(0.01, True),
                         nn.Conv3d(cout, cout, 3, padding=1), nn.InstanceNorm3d(cout), nn.LeakyReLU(0.01, True))


class UNet3D(nn.Module):
    def __init__(self, cin=4, f=16):
        super().__init__()
        self.enc = nn.ModuleList([block(cin, f), block(f, 2 * f), block(2 * f, 4 * f), block(4 * f, 8 * f)])
        self.up = nn.ModuleList([nn.ConvTranspose3d(8 * f, 4 * f, 2, 2), nn.ConvTranspose3d(4 * f, 2 * f, 2, 2), nn.ConvTranspose3d(2 * f, f, 2, 2)])
        self.dec = nn.ModuleList([block(8 * f, 4 * f), block(4 * f, 2 * f), block(2 * f, f)])
        self.head = nn.Conv3d(f, N_CLASSES, 1)

    def forward(self, x):
        skips = []
        for i, e in enumerate(self.enc):
            x = e(x if i == 0 else F.max_pool3d(x, 2))
            skips.append(x)
        for up, dec, skip in zip(self.up, self.dec, reversed(skips[:-1])):
            x = dec(torch.cat([up(x), skip], 1))
        return self.head(x)


@torch.compile(options=CG)
def augment(vol, seg):
    if np.random.rand() > 0.5:  # HAZARD: host-code
        vol, seg = torch.flip(vol, dims=(2,)), torch.flip(seg, dims=(1,))  # CLEAN: flip over a fixed axis, no shape change
    scale = 1.0 + 0.1 * (torch.rand(vol.size(0), 1, 1, 1, 1, device=vol.device) - 0.5)
    return vol * scale, seg


@torch.compile(options=CG)
def soft_dice_loss(logits, seg, eps=1e-5):
    probs = F.softmax(logits, 1)
    target = F.one_hot(seg, N_CLASSES).permute(0, 4, 1, 2, 3).float()  # CLEAN: one_hot with num_classes, fixed shape
    loss = 0.0
    for c in range(1, N_CLASSES):
        if target[:, c].sum() == 0:  # HAZARD: dynamic-control-flow
            continue
        inter = (probs[:, c] * target[:, c]).sum()
        loss = loss + 1 - (2 * inter + eps) / (probs[:, c].sum() + target[:, c].sum() + eps)
    return loss / (N_CLASSES - 1)


@torch.compile(options=CG)
def region_dice(pred, seg):
    out = {}
    for name, labels in (("WT", (1, 2, 3)), ("TC", (1, 3)), ("ET", (3,))):
        p, t = sum(pred == l for l in labels).float(), sum(seg == l for l in labels).float()
        out[name] = (2 * (p * t).sum() / (p.sum() + t.sum() + 1e-5)).item()  # HAZARD: host-sync
    return out


model = UNet3D().cuda()
cmodel = torch.compile(model, mode="reduce-overhead")


def train(loader, epochs=300):
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, weight_decay=1e-5)
    for epoch in range(epochs):
        for vol, seg in loader:
            vol, seg = augment(vol.cuda(), seg.cuda())
            loss = soft_dice_loss(cmodel(vol), seg)
            opt.zero_grad()
            loss.backward()
            opt.step()


@torch.no_grad()
def sliding_window(volume, patch=128, stride=64):
    model.eval()
    windows, kept = [], []
    _, _, D, H, W = volume.shape
    for z in range(0, D - patch + 1, stride):
        for y in range(0, H - patch + 1, stride):
            for x in range(0, W - patch + 1, stride):
                crop = volume[:, :, z:z + patch, y:y + patch, x:x + patch]  # CLEAN: every crop is patch^3, one recorded graph
                out = cmodel(crop)
                windows.append(out)  # HAZARD: static-address
                kept.append(out.argmax(1).cpu().numpy())  # CLEAN: eager host copy right after the call
    return windows, kept
