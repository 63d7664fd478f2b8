"""PatchCore anomaly detection on MVTec AD (wide_resnet50 layer2+layer3 patches, coreset memory bank).

Assistant diff: "torch.compile the backbone and wrap scoring in a CUDA graph for the inspection line".
"""
import logging
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

log = logging.getLogger("patchcore")


class FeatureExtractor(nn.Module):
    def __init__(self):
        super().__init__()
        wrn = torchvision.models.wide_resnet50_2(weights="IMAGENET1K_V1")
        self.stem = nn.Sequential(wrn.conv1, wrn.bn1, wrn.relu, wrn.maxpool, wrn.layer1)
        self.layer2, self.layer3 = wrn.layer2, wrn.layer3

    def forward(self, x):
        f2 = self.layer2(self.stem(x))
        f3 = self.layer3(f2)
        f2 = F.avg_pool2d(f2, 3, 1, 1)
        f3 = F.interpolate(F.avg_pool2d(f3, 3, 1, 1), size=f2.shape[-2:], mode="bilinear", align_corners=False)
        return torch.cat([f2, f3], dim=1)


class PatchCoreGraph:
    def __init__(self, memory_bank, image_size=224, batch=8, threshold=2.5):
        self.backbone = torch.compile(FeatureExtractor().cuda().eval())  # "free speed-up"
        self.memory_bank = memory_bank  # (M, 1536) coreset, fp32
        self.threshold = threshold
        self.sigma = 4
        self.static_img = torch.zeros(batch, 3, image_size, image_size, device="cuda")
        self.graph = None

    def _gauss_taps(self):
        r = 4 * self.sigma
        taps = [math.exp(-(i * i) / (2 * self.sigma ** 2)) for i in range(-r, r + 1)]
        return [t / sum(taps) for t in taps]

    def _knn(self, feats):
        b, c, h, w = feats.shape
        patches = feats.permute(0, 2, 3, 1).reshape(-1, c)
        dist = torch.cdist(patches, self.memory_bank)
        nn_dist = dist.topk(1, dim=1, largest=False).values.squeeze(1)  # CLEAN: fixed-k topk, no host read
        return nn_dist.view(b, 1, h, w)

    def _forward(self, img):
        feats = self.backbone(img)  # HAZARD: api-misuse
        patch_map = self._knn(feats)
        img_score = patch_map.flatten(1).amax(1)
        amap = F.interpolate(patch_map, size=img.shape[-2:], mode="bilinear", align_corners=False)
        k = torch.tensor(self._gauss_taps(), device=img.device)  # HAZARD: host-sync
        amap = F.conv2d(amap, k.view(1, 1, 1, -1), padding=(0, k.numel() // 2))
        amap = F.conv2d(amap, k.view(1, 1, -1, 1), padding=(k.numel() // 2, 0))
        if (img_score > self.threshold).any():  # HAZARD: dynamic-control-flow
            log.warning("defect candidate in batch")
        return img_score, amap

    @torch.no_grad()
    def capture(self):
        dummy = torch.randn(4, 1536, 28, 28, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._knn(dummy)  # warm-up (cdist workspace)
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            with torch.cuda.graph(self.graph):
                self.s_score, self.s_map = self._forward(self.static_img)

    def switch_category(self, coreset):
        if coreset.shape == self.memory_bank.shape:
            self.memory_bank.copy_(coreset)  # CLEAN: copy_ into the captured bank
        else:
            self.memory_bank = coreset  # HAZARD: static-address

    @torch.no_grad()
    def __call__(self, imgs):
        if self.graph is None:
            self.capture()
        self.static_img.copy_(imgs)  # CLEAN: copy_ into the static input
        self.graph.replay()
        return self.s_score.clone(), self.s_map.clone()  # CLEAN: outputs cloned before the next replay


def evaluate(det, loader):
    scores, labels = [], []
    for imgs, y in loader:
        s, _ = det(imgs.cuda(non_blocking=True))
        scores.append(s.cpu())  # CLEAN: host read after replay, outside the graph
        labels.append(y)
    return torch.cat(scores), torch.cat(labels)
