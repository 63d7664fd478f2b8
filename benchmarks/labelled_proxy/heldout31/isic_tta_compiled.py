"""ISIC 2020 melanoma inference: EfficientNet-B3 image branch + patient metadata MLP, 8-way flip TTA.

The assistant changed `model = model.eval()` to `model = torch.compile(model.eval(), mode="reduce-overhead")`
for the screening service and kept a no-cudagraphs build for the research notebook.
"""
import logging

import torch
import torch.nn as nn
import timm

log = logging.getLogger("isic")
SITES = ["head/neck", "upper extremity", "lower extremity", "torso", "palms/soles", "oral/genital", "unknown"]


class MelanomaNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.cnn = timm.create_model("efficientnet_b3", pretrained=False, num_classes=0)
        self.meta = nn.Sequential(nn.Linear(2 + len(SITES), 128), nn.BatchNorm1d(128), nn.SiLU(), nn.Linear(128, 64), nn.SiLU())
        self.head = nn.Linear(self.cnn.num_features + 64, 1)
        self.malignant_thresh = 0.5  # tuned per clinic on its validation set

    def forward(self, img, meta):
        f = torch.cat([self.cnn(img), self.meta(meta)], 1)
        p = torch.sigmoid(self.head(f)).squeeze(1)
        log.info("scored %d lesions, mean p=%s", p.shape[0], p.mean())  # HAZARD: host-code
        flag = p > self.malignant_thresh  # HAZARD: python-scalar
        return p, flag


def tta_views(img):
    views = []
    for k in range(4):
        r = torch.rot90(img, k, dims=(2, 3))
        views += [r, torch.flip(r, dims=(3,))]  # CLEAN: flips/rotations keep the square shape
    return views


class ScreeningService:
    def __init__(self, weights, image_size=512):
        net = MelanomaNet()
        net.load_state_dict(torch.load(weights, map_location="cpu"))
        self.net = net.cuda().eval()
        self.model = torch.compile(self.net, mode="reduce-overhead")
        self.research = torch.compile(self.net, mode="max-autotune-no-cudagraphs")
        self.size = image_size

    def set_clinic(self, thresh):
        self.net.malignant_thresh = thresh

    @torch.no_grad()
    def screen(self, img, meta):
        probs = []
        for v in tta_views(img):
            p, _ = self.model(v, meta)
            probs.append(p)  # HAZARD: static-address
        return torch.stack(probs).mean(0)

    @torch.no_grad()
    def screen_safe(self, img, meta):
        probs = [self.model(v, meta)[0].clone() for v in tta_views(img)]  # CLEAN: each output cloned before the next call
        return torch.stack(probs).mean(0)

    @torch.no_grad()
    def screen_external(self, batches):
        out = []
        for img, meta in batches:  # Derm7pt / PH2 images, native resolutions
            p, flag = self.model(img.cuda(), meta.cuda())  # HAZARD: dynamic-shape
            out.append((p.cpu(), flag.cpu()))  # CLEAN: host copies right after the call
        return out

    @torch.no_grad()
    def research_probe(self, img, meta):
        views = [self.research(v, meta)[0] for v in tta_views(img)]  # CLEAN: no-cudagraphs build, outputs not reused
        return torch.stack(views).std(0)


def encode_meta(age, sex, site):
    onehot = [1.0 if s == site else 0.0 for s in SITES]
    return torch.tensor([[age / 90.0, 1.0 if sex == "male" else 0.0] + onehot])
