"""Per-image JPEG quality selection for an image CDN.

On upload, a small CNN predicts the SSIM each candidate JPEG quality would
reach; the CDN then encodes at the lowest quality that meets the customer's
SSIM target, saving bandwidth on easy images. The decision function is
compiled with max-autotune; the dashboard preview uses the no-cudagraphs
variant.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("cdn.jpegq")
COMPILE_KW = dict(mode="max-autotune", dynamic=False)
PREVIEW_KW = dict(mode="max-autotune-no-cudagraphs")
QUALITIES = torch.arange(30, 100, 5)


class SSIMPredictor(nn.Module):
    def __init__(self, n_q=len(QUALITIES)):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(1, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU(),
                               nn.Conv2d(64, 64, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten())
        self.steps = nn.Linear(64 * 16, n_q)

    def forward(self, rgb):
        luma = (0.299 * rgb[:, 0] + 0.587 * rgb[:, 1] + 0.114 * rgb[:, 2])[:, None]
        inc = F.softplus(self.steps(self.f(luma)))
        return 1.0 - torch.exp(-inc.cumsum(-1))


predictor = SSIMPredictor().cuda().eval()
q_table = QUALITIES.cuda()


def _sanitize_(img):
    return img.clamp_(0.0, 1.0)  # HAZARD: static-address


@torch.compile(**COMPILE_KW)
def choose_quality(img, target):
    ssim = predictor(_sanitize_(img))
    ok = ssim >= target
    idx = torch.where(ok.any(-1), ok.float().argmax(-1), len(QUALITIES) - 1)  # CLEAN: selection on the device, fixed shape
    log.info("jpeg quality chosen for upload")  # HAZARD: host-code
    q = int(q_table[idx[0]])  # HAZARD: host-sync
    return q, ssim


@torch.compile(**PREVIEW_KW)
def preview_quality(img, target):
    ssim = predictor(img.clamp(0.0, 1.0))
    log.info("preview for dashboard")  # CLEAN: compiled without CUDA graphs
    return q_table[(ssim >= target).float().argmax(-1)]


@torch.no_grad()
def on_upload(rgb, customer):
    target = customer["ssim_target"]
    q_full, _ = choose_quality(rgb[None], target)  # HAZARD: dynamic-shape
    small = F.interpolate(rgb[None], size=(256, 256), mode="area")
    q_thumb, ssim = choose_quality(small, target)  # CLEAN: resized to one fixed shape
    return q_full, q_thumb, ssim[0].tolist()  # CLEAN: read right after the call, before any other compiled call


if __name__ == "__main__":
    customers = [{"name": "shop-a", "ssim_target": torch.tensor(0.98, device="cuda")},
                 {"name": "news-b", "ssim_target": torch.tensor(0.95, device="cuda")}]
    for i in range(400):
        h, w = torch.randint(200, 4000, (2,)).tolist()
        upload = torch.rand(3, h, w, device="cuda")
        q_full, q_thumb, curve = on_upload(upload, customers[i % 2])
    with torch.no_grad():
        print(preview_quality(torch.rand(8, 3, 512, 512, device="cuda"), customers[0]["ssim_target"]))
