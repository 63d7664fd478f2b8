"""Saliency-driven auto-crop of display-ad creatives for every slot format.

Advertisers upload one 512x512 master image; the ad server needs crops for the
leaderboard, medium rectangle, skyscraper and story slots. A saliency net
(plus the advertiser's logo-position prior) scores every window of the slot's
aspect ratio and the best window wins. One graph per slot format.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SLOTS = {"leaderboard": (90, 728), "mrec": (250, 300), "skyscraper": (600, 160), "story": (640, 360)}
SAL = 128


class SaliencyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(
            nn.Conv2d(3, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU(),
            nn.Conv2d(64, 64, 3, 1, 2, dilation=2), nn.ReLU())
        self.out = nn.Conv2d(64, 1, 1)

    def forward(self, img):
        s = self.out(self.enc(img))
        return torch.sigmoid(F.interpolate(s, size=(SAL, SAL), mode="bilinear", align_corners=False))


class AutoCropper:
    def __init__(self, net: SaliencyNet, brand_prior: np.ndarray, batch: int = 8):
        self.net = net.cuda().eval()
        self.brand_prior_np = brand_prior         # (SAL, SAL) float32, swapped per advertiser
        self.safe_margin = 0.05                   # fraction kept clear of the slot border
        self.static_img = torch.zeros(batch, 3, 512, 512, device="cuda")
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.boxes = {}, {}
        for name, (h, w) in SLOTS.items():
            self._capture(name, h / w)

    def set_advertiser(self, prior: np.ndarray, margin: float):
        self.brand_prior_np = prior
        self.safe_margin = margin

    def _best_crop(self, aspect: float):
        sal = self.net(self.static_img)[:, 0]
        prior = torch.from_numpy(self.brand_prior_np).to("cuda")  # HAZARD: pinned-memory
        sal = sal * (1 + prior)
        if sal.sum() == 0:  # HAZARD: dynamic-control-flow
            sal = torch.ones_like(sal)
        m = self.safe_margin  # HAZARD: python-scalar
        kh = int(SAL * min(1.0, aspect) * (1 - 2 * m))
        kw = int(SAL * min(1.0, 1.0 / aspect) * (1 - 2 * m))
        score = F.avg_pool2d(sal[:, None], (kh, kw), stride=4)[:, 0]
        flat = score.flatten(1).argmax(1)
        oy = (flat // score.shape[-1]) * 4
        ox = (flat % score.shape[-1]) * 4
        return torch.stack([oy, ox, oy + kh, ox + kw], 1).float() / SAL

    @torch.no_grad()
    def _capture(self, name: str, aspect: float):
        for _ in range(3):
            self._best_crop(aspect)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool, stream=torch.cuda.current_stream()):  # HAZARD: stream
            self.boxes[name] = self._best_crop(aspect)
        self.graphs[name] = g

    @torch.no_grad()
    def crops_for(self, masters: torch.Tensor, slot: str):
        n = masters.shape[0]
        self.static_img[:n].copy_(masters)  # CLEAN: copy_ into the static input
        self.graphs[slot].replay()
        boxes = self.boxes[slot][:n].tolist()  # CLEAN: tolist after replay, outside the capture
        out = []
        for img, (y0, x0, y1, x1) in zip(masters, boxes):
            H, W = img.shape[-2:]
            crop = img[:, int(y0 * H):int(y1 * H), int(x0 * W):int(x1 * W)]
            out.append(F.interpolate(crop[None], size=SLOTS[slot], mode="bilinear", align_corners=False)[0])
        return out


def render_campaign(cropper: AutoCropper, advertisers):
    rendered = {}
    for adv in advertisers:
        cropper.set_advertiser(adv["logo_prior"], adv.get("margin", 0.05))
        for slot in SLOTS:
            rendered[(adv["id"], slot)] = cropper.crops_for(adv["masters"], slot)
    return rendered


if __name__ == "__main__":
    prior = np.zeros((SAL, SAL), np.float32)
    c = AutoCropper(SaliencyNet(), prior)
    advs = [{"id": 1, "logo_prior": prior, "masters": torch.rand(4, 3, 512, 512, device="cuda"), "margin": 0.1}]
    print(len(render_campaign(c, advs)))
