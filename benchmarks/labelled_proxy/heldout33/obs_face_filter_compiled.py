"""OBS plugin backend (Python, loaded by obs-scripting): face landmark filter.

Per frame: landmark net -> smoothing -> warp net for the "big eyes" effect. Both nets are
compiled with options={"triton.cudagraphs": True}.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

CG = {"triton.cudagraphs": True}
N_PTS, H, W = 68, 256, 256
FILTER = {"smoothing": 0.6, "eye_scale": 1.3, "debug": False}


class LandmarkNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 32, 5, 4, 2), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU(),
                                  nn.AdaptiveAvgPool2d(4))
        self.fc = nn.Linear(64 * 16, N_PTS * 3)
        self.register_buffer("prev", torch.zeros(1, N_PTS, 2))

    def forward(self, frame):
        out = self.fc(self.body(frame).flatten(1)).view(-1, N_PTS, 3)
        pts, conf = torch.sigmoid(out[..., :2]), torch.sigmoid(out[..., 2])
        a = FILTER["smoothing"]  # HAZARD: python-scalar
        smooth = a * self.prev + (1 - a) * pts
        self.prev.copy_(smooth)  # CLEAN: registered buffer updated in place
        visible = (conf > 0.5).nonzero()  # HAZARD: dynamic-shape
        print("visible landmarks", visible.shape[0])  # HAZARD: host-code
        return smooth, conf


class EyeWarp(nn.Module):
    def forward(self, frame, pts, scale):
        eyes = pts[:, 36:48].mean(1, keepdim=True)
        yy, xx = torch.meshgrid(torch.linspace(0, 1, H, device=frame.device),
                                torch.linspace(0, 1, W, device=frame.device), indexing="ij")
        grid = torch.stack([xx, yy], -1)[None]
        d = grid - eyes[:, :, None, :]
        r = d.norm(dim=-1, keepdim=True)
        warped = eyes[:, :, None, :] + d * torch.where(r < 0.1, 1 / scale, torch.ones_like(r))  # CLEAN: three-argument where
        return F.grid_sample(frame, warped * 2 - 1, align_corners=False)


landmarks = torch.compile(LandmarkNet().cuda().eval(), options=CG)
warp = torch.compile(EyeWarp(), options=CG)
warp_preview = torch.compile(EyeWarp(), options={"triton.cudagraphs": False})
scale_t = torch.full((), 1.3, device="cuda")


@torch.no_grad()
def filter_frame(frame_u8: torch.Tensor, preview=False):
    frame = frame_u8.permute(2, 0, 1)[None].float().div(255)
    frame = F.interpolate(frame, size=(H, W), mode="bilinear")
    pts, conf = landmarks(frame)
    scale_t.fill_(FILTER["eye_scale"])  # CLEAN: eye scale passed as a device tensor
    if preview:
        out = warp_preview(frame, pts, scale_t)  # CLEAN: cudagraphs disabled for the preview build
    else:
        out = warp(frame, pts.clone(), scale_t)  # CLEAN: landmarks cloned before the next compiled call
    mean_conf = conf.mean()  # HAZARD: static-address
    if FILTER["debug"]:
        print("mean confidence", float(mean_conf))
    return (out[0].permute(1, 2, 0) * 255).byte()


def script_update(settings_dict):
    FILTER.update(settings_dict)
