"""Surface inspection on a hot-strip mill: four defect classes on line-scan images.

The segmentation net runs at line speed on 256-row slices of the strip; defect pixels are
reported to the mill's quality system. The forward is compiled with max-autotune for the
inline station; the offline review station uses the no-cudagraphs variant.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

CLASSES = ("pitting", "inclusion", "scratch", "patch")


class SteelSegNet(nn.Module):
    def __init__(self, c=32, empty_thr=0.2):
        super().__init__()
        self.empty_thr = empty_thr
        self.down = nn.Sequential(nn.Conv2d(1, c, 3, 2, 1), nn.ReLU(), nn.Conv2d(c, 2 * c, 3, 2, 1), nn.ReLU())
        self.mid = nn.Sequential(nn.Conv2d(2 * c, 2 * c, 3, 1, 2, dilation=2), nn.ReLU())
        self.head = nn.Conv2d(2 * c, len(CLASSES), 1)

    def forward(self, strip):                                 # B, 1, 256, W
        heat = torch.sigmoid(self.head(self.mid(self.down(strip))))
        if heat.amax() < self.empty_thr:  # HAZARD: dynamic-control-flow
            return heat, heat.new_zeros(0, 4)
        hits = (heat > 0.5).nonzero()  # HAZARD: dynamic-shape
        return heat, hits


class InlineStation:
    def __init__(self, model, width_px=1600):
        self.model = model.cuda().eval()
        self.model.forward = torch.compile(self.model.forward, mode="max-autotune")
        self.width_px = width_px

    @torch.no_grad()
    def inspect_coil(self, slices):
        reports = []
        for sl in slices:                                     # coil width varies between 900 and 1650 mm
            heat, hits = self.model(sl)  # HAZARD: dynamic-shape
            reports.append((heat.amax(dim=(0, 2, 3)).cpu(), hits.cpu()))
        return reports

    @torch.no_grad()
    def inspect_coil_fixed(self, slices):
        reports = []
        for sl in slices:
            sl = F.pad(sl, (0, self.width_px - sl.shape[-1]))  # CLEAN: padded to one width, one graph
            heat, hits = self.model(sl)
            reports.append((heat.amax(dim=(0, 2, 3)).cpu(), hits.cpu()))  # CLEAN: host copies made before the next compiled call
        return reports


class ReviewStation:
    def __init__(self, model):
        self.model = model.cuda().eval()
        self.run = torch.compile(self.model, mode="max-autotune-no-cudagraphs")

    @torch.no_grad()
    def review(self, slices):
        return [self.run(sl)[1].cpu() for sl in slices]  # CLEAN: no CUDA graphs in the review compile


if __name__ == "__main__":
    coils = [[torch.rand(1, 1, 256, w, device="cuda") for _ in range(40)] for w in (1100, 1480, 1600, 1250)]
    inline = InlineStation(SteelSegNet())
    for coil in coils:
        rep = inline.inspect_coil(coil)
        print(len(rep), rep[0][0])
    rep_fixed = inline.inspect_coil_fixed(coils[0])
    review = ReviewStation(SteelSegNet())
    print(len(review.review(coils[1])))
