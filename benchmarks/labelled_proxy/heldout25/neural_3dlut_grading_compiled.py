"""Image-adaptive 3D LUT colour grading (Zeng et al.) for the photo editor's "auto look".

A tiny CNN on a 256x256 thumbnail predicts weights for 3 basis LUTs (33^3); the fused
LUT is applied to the full-resolution photo with trilinear `grid_sample`.
Training and the apply path use the inductor CUDA-graph option dict below.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

CG = {"triton.cudagraphs": True}
DIM = 33


class LUTWeights(nn.Module):
    def __init__(self, n_luts=3):
        super().__init__()
        self.cnn = nn.Sequential(
            nn.Conv2d(3, 16, 3, 2, 1), nn.LeakyReLU(0.2), nn.InstanceNorm2d(16, affine=True),
            nn.Conv2d(16, 32, 3, 2, 1), nn.LeakyReLU(0.2), nn.InstanceNorm2d(32, affine=True),
            nn.Conv2d(32, 64, 3, 2, 1), nn.LeakyReLU(0.2), nn.AdaptiveAvgPool2d(2))
        self.fc = nn.Linear(256, n_luts)
        ident = torch.stack(torch.meshgrid(*[torch.linspace(0, 1, DIM)] * 3, indexing="ij"), 0)
        self.luts = nn.Parameter(ident.flip(0)[None].repeat(n_luts, 1, 1, 1, 1) + 0.01 * torch.randn(n_luts, 3, DIM, DIM, DIM))

    def forward(self, thumb):
        return self.fc(self.cnn(thumb).flatten(1))


def apply_lut(img, lut):
    grid = (img.permute(0, 2, 3, 1)[:, None] * 2 - 1)
    out = F.grid_sample(lut, grid, mode="bilinear", padding_mode="border", align_corners=True)
    return out[:, :, 0]


def _grade(model, img):
    img.clamp_(0.0, 1.0)  # HAZARD: static-address
    thumb = F.interpolate(img, size=(256, 256), mode="bilinear", align_corners=False)
    w = model(thumb)
    if w.abs().sum() < 1e-6:  # HAZARD: dynamic-control-flow
        w = torch.ones_like(w) / w.shape[1]
    lut = torch.einsum("bn,ncxyz->bcxyz", w, model.luts)
    return apply_lut(img, lut), w


grade = torch.compile(_grade, options=CG)


@torch.compile(options=CG)
def train_loss(model, raw, target):
    out, w = _grade(model, raw.clone())
    tv = (model.luts[..., 1:] - model.luts[..., :-1]).pow(2).mean()
    mono = F.relu(model.luts[..., :-1] - model.luts[..., 1:]).mean()
    return F.mse_loss(out, target) + 1e-4 * tv + 10.0 * mono


def train(model, loader, epochs=400):
    model = model.cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=1e-4)
    step = torch.compile(opt.step, options=CG)
    for epoch in range(epochs):
        if epoch == 200:
            opt.param_groups[0]["weight_decay"] = 0.0  # HAZARD: optimizer
        for raw, target in loader:          # fixed 480x480 random crops
            loss = train_loss(model, raw.cuda(), target.cuda())
            loss.backward()
            step()
            opt.zero_grad()


def export_preview(model, photos):
    fast_preview = torch.compile(_grade, mode="max-autotune-no-cudagraphs")
    previews = []
    with torch.no_grad():
        for p in photos:
            previews.append(fast_preview(model, p.cuda()[None].clone())[0].cpu())  # CLEAN: no CUDA graphs in this mode
    return previews


def auto_look(model, photos):
    model = model.cuda().eval()
    graded = []
    with torch.no_grad():
        for p in photos:                  # camera JPEGs, every size
            out, _ = grade(model, p.cuda()[None])  # HAZARD: dynamic-shape
            graded.append(out[0].clamp(0, 1).cpu())  # CLEAN: copied to the host before the next call
    return graded
