"""Camera-trap species classification with an empty-frame filter (Snapshot Serengeti style).

Burst images arrive from field stations with EXIF timestamps. Night (infrared) frames get
a gamma lift before classification. Bursts that are almost surely empty are dropped
early. The classifier is compiled with options={"triton.cudagraphs": True}.
"""
import torch
import torch.nn as nn
import torchvision

CLASSES = ["empty", "wildebeest", "zebra", "gazelle_thomsons", "impala", "buffalo", "elephant",
           "giraffe", "hyena_spotted", "lion_female", "warthog", "human", "other"]
EMPTY, BURST = 0, 16


class TrapNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = torchvision.models.resnet18(num_classes=len(CLASSES))

    def forward(self, img):
        return self.backbone(img)


model = TrapNet().cuda().eval()


@torch.compile(options={"triton.cudagraphs": True})
def night_enhance_(img):
    img.pow_(0.6)  # HAZARD: static-address
    return img


@torch.compile(options={"triton.cudagraphs": True})
def classify_burst(img, exif_hour):
    is_night = exif_hour < 6 or exif_hour >= 19  # HAZARD: python-scalar
    x = img.pow(0.6) if is_night else img
    probs = model((x - 0.45) / 0.25).softmax(-1)
    if probs[:, EMPTY].mean() > 0.9:  # HAZARD: dynamic-control-flow
        return None
    top = probs.mean(0).topk(3)
    names = [CLASSES[i] for i in top.indices.tolist()]  # HAZARD: host-sync
    return names, top.values


@torch.compile(options={"triton.cudagraphs": True})
def classify_burst_masked(img, night):
    x = torch.where(night.view(-1, 1, 1, 1), img.clamp_min(1e-6).pow(0.6), img)  # CLEAN: device-side night flag, no Python branch
    probs = model((x - 0.45) / 0.25).softmax(-1)
    return probs.mean(0), probs[:, EMPTY].mean()


@torch.compile(mode="max-autotune-no-cudagraphs")
def relabel_archive(img):
    probs = model((img - 0.45) / 0.25).softmax(-1)
    keep = probs[:, EMPTY] < 0.5
    return probs[keep].argmax(-1)  # CLEAN: max-autotune-no-cudagraphs, no CUDA graphs


@torch.no_grad()
def process_station(bursts):
    results = []
    for img, hour in bursts:
        out = classify_burst(img, hour)
        if out is None:
            continue
        names, conf = out
        results.append((names, conf.cpu()))
    return results


@torch.no_grad()
def process_station_masked(bursts):
    results = []
    for img, hour in bursts:
        night = torch.full((BURST,), hour < 6 or hour >= 19, device="cuda")
        mean_probs, p_empty = classify_burst_masked(img, night)
        if p_empty.item() > 0.9:  # CLEAN: host read after the compiled call returned
            continue
        top = mean_probs.topk(3)
        results.append(([CLASSES[i] for i in top.indices.tolist()], top.values.cpu()))
    return results


if __name__ == "__main__":
    bursts = [(torch.rand(BURST, 3, 224, 224, device="cuda"), h) for h in (3, 7, 12, 18, 21, 23)]
    print(process_station(bursts))
    print(process_station_masked(bursts))
    archive = torch.rand(256, 3, 224, 224, device="cuda")
    night_enhance_(archive)
    print(relabel_archive(archive).bincount(minlength=len(CLASSES)))
