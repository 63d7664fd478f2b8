"""Calving-front delineation of marine-terminating glaciers in Sentinel-1 SAR scenes.

A U-Net segments rock / glacier / ocean+ice-melange; the front is the glacier-ocean boundary.
The operational monitor compiles the model's forward with mode="max-autotune"; the
scientists' review tool uses a separate instance compiled without CUDA graphs.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

TILE = 512


class FrontUNet(nn.Module):
    def __init__(self, c=32, verbose=True):
        super().__init__()
        self.verbose = verbose
        self.d1 = nn.Sequential(nn.Conv2d(1, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1), nn.ReLU())
        self.d2 = nn.Sequential(nn.Conv2d(c, 2 * c, 3, padding=1), nn.ReLU())
        self.d3 = nn.Sequential(nn.Conv2d(2 * c, 4 * c, 3, padding=1), nn.ReLU())
        self.u2 = nn.Sequential(nn.Conv2d(6 * c, 2 * c, 3, padding=1), nn.ReLU())
        self.u1 = nn.Sequential(nn.Conv2d(3 * c, c, 3, padding=1), nn.ReLU())
        self.head = nn.Conv2d(c, 3, 1)

    def forward(self, sar):
        x1 = self.d1(sar)
        x2 = self.d2(F.max_pool2d(x1, 2))
        x3 = self.d3(F.max_pool2d(x2, 2))
        y = self.u2(torch.cat([F.interpolate(x3, scale_factor=2.0), x2], 1))
        logits = self.head(self.u1(torch.cat([F.interpolate(y, scale_factor=2.0), x1], 1)))
        if self.verbose:
            print("front logits range", logits.aminmax())  # HAZARD: host-code
        if logits.std() < 1e-3:  # HAZARD: dynamic-control-flow
            logits = logits + 0.0 * sar                           # dead scene (radar shadow): keep as is
        return logits.softmax(1)


def front_from_prob(prob):
    glacier, ocean = prob[:, 1:2], prob[:, 2:3]
    edge = F.max_pool2d(glacier, 3, 1, 1) * F.max_pool2d(ocean, 3, 1, 1)
    return torch.where(edge > 0.25, edge, torch.zeros_like(edge))  # CLEAN: torch.where keeps the shape static


class CalvingMonitor:
    def __init__(self, weights):
        self.model = FrontUNet().cuda().eval()
        self.model.load_state_dict(weights)
        self.model.forward = torch.compile(self.model.forward, mode="max-autotune")
        self.review = FrontUNet(verbose=False).cuda().eval()
        self.review.load_state_dict(weights)
        self.review.forward = torch.compile(self.review.forward, mode="max-autotune-no-cudagraphs")

    @torch.no_grad()
    def tiles(self, scene):
        h, w = scene.shape[-2:]
        padded = F.pad(scene, (0, -w % TILE, 0, -h % TILE), mode="reflect")
        for i in range(0, padded.shape[-2], TILE):
            for j in range(0, padded.shape[-1], TILE):
                yield self.model(padded[..., i:i + TILE, j:j + TILE]).clone()  # CLEAN: fixed 512 tiles, output cloned

    @torch.no_grad()
    def monitor(self, scenes):
        fronts = []
        for scene in scenes:                                   # Jakobshavn, Helheim, ... full scenes
            prob = self.model(scene)  # HAZARD: dynamic-shape
            fronts.append(prob)  # HAZARD: static-address
        return [front_from_prob(p) for p in fronts]

    @torch.no_grad()
    def review_scene(self, scene):
        return front_from_prob(self.review(scene))  # CLEAN: review model compiled without CUDA graphs


if __name__ == "__main__":
    mon = CalvingMonitor(FrontUNet().state_dict())
    scenes = [torch.rand(1, 1, 1536 + 64 * k, 2048 - 32 * k, device="cuda") for k in range(6)]
    fronts = mon.monitor(scenes)
    tiles = list(mon.tiles(scenes[0]))
    qa = mon.review_scene(scenes[1])
