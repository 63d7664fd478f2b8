"""Low-dose CT denoising (RED-CNN residual encoder-decoder) with dose-level conditioning.

Training and full-volume inference go through options={"triton.cudagraphs": True} compiles.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

HU_MIN, HU_MAX = -1024.0, 3071.0
CG_OPTS = {"triton.cudagraphs": True}


class REDCNN(nn.Module):
    def __init__(self, c=96):
        super().__init__()
        self.enc = nn.ModuleList([nn.Conv2d(2, c, 5)] + [nn.Conv2d(c, c, 5) for _ in range(4)])
        self.dec = nn.ModuleList([nn.ConvTranspose2d(c, c, 5) for _ in range(4)] + [nn.ConvTranspose2d(c, 1, 5)])
        self.dose = 0.25  # fraction of the full clinical dose for the current scan

    def forward(self, x):  # (B, 1, H, W) scaled to [0, 1]
        dose = self.dose  # HAZARD: python-scalar
        h, skips = torch.cat([x, torch.full_like(x, dose)], 1), []
        for i, conv in enumerate(self.enc):
            h = F.relu(conv(h))
            if i % 2 == 1:
                skips.append(h)
        for i, deconv in enumerate(self.dec):
            h = deconv(h)
            if i % 2 == 0 and skips:
                h = h + skips.pop()
            h = F.relu(h) if i < len(self.dec) - 1 else h
        return h + x


@torch.compile(options=CG_OPTS)
def to_unit_(x):
    return x.clamp_(HU_MIN, HU_MAX).sub_(HU_MIN).div_(HU_MAX - HU_MIN)  # HAZARD: static-address


def to_unit(x):
    return (x.clamp(HU_MIN, HU_MAX) - HU_MIN) / (HU_MAX - HU_MIN)  # CLEAN: out-of-place windowing


@torch.compile(options=CG_OPTS)
def val_metrics(pred, target):
    mse = F.mse_loss(pred, target)
    psnr = 10 * torch.log10(1.0 / mse)
    return {"psnr": psnr.item(), "rmse_hu": mse.sqrt() * (HU_MAX - HU_MIN)}  # HAZARD: host-sync


model = REDCNN().cuda()
denoise = torch.compile(model, options=CG_OPTS, dynamic=False)
preview = torch.compile(model, mode="max-autotune-no-cudagraphs")


def train(loader, epochs=50):
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    for epoch in range(epochs):
        for ld, nd, dose in loader:  # 64x64 patches, HU values, per-scan dose fraction
            model.dose = float(dose[0])
            pred = denoise(to_unit_(ld.cuda(non_blocking=True)))  # CLEAN: fixed 64x64 training patches
            loss = F.mse_loss(pred, to_unit(nd.cuda(non_blocking=True)))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        print(f"epoch {epoch}: mse {loss.item():.2e}")  # CLEAN: .item() in the eager loop


@torch.no_grad()
def denoise_volume(volume, boxes, dose):
    model.dose = dose
    out = volume.clone()
    for z, (y0, y1, x0, x1) in enumerate(boxes):  # body bounding box per slice, differs slice to slice
        crop = to_unit(volume[z, y0:y1, x0:x1][None, None].cuda())
        out[z, y0:y1, x0:x1] = denoise(crop)[0, 0].cpu() * (HU_MAX - HU_MIN) + HU_MIN  # HAZARD: dynamic-shape
    return out


@torch.no_grad()
def quick_look(volume, boxes):
    crops = []
    for z, (y0, y1, x0, x1) in enumerate(boxes):
        crops.append(preview(to_unit(volume[z, y0:y1, x0:x1][None, None].cuda())).cpu())  # CLEAN: body crops under max-autotune-no-cudagraphs
    return crops


@torch.no_grad()
def validate(pairs):  # fixed 512x512 validation slices
    return [val_metrics(denoise(to_unit(ld.cuda())), to_unit(nd.cuda())) for ld, nd in pairs]
