"""Semantic segmentation inference and evaluation for the street-scene pipeline.

Backbone, post-processing and label remapping are module-level functions with
compile decorators; the overlay renderer uses the no-cudagraphs autotune mode.
"""
import torch
import torch.nn.functional as F

IGNORE = 255


@torch.compile(mode="reduce-overhead")
def run_backbone(model, img):
    return model(img)


@torch.compile(mode="reduce-overhead")
def postprocess(logits, min_conf: float = 0.5):
    probs = logits.softmax(1)
    conf, labels = probs.max(1)
    labels = labels.masked_fill(conf < min_conf, IGNORE)  # CLEAN: low-confidence pixels masked elementwise
    present = torch.unique(labels)  # HAZARD: dynamic-shape
    print("postprocess: batch done")  # HAZARD: host-code
    return labels, present


@torch.compile(mode="reduce-overhead")
def remap_(labels, table):
    labels.copy_(table[labels])  # HAZARD: static-address
    return labels


@torch.compile(mode="max-autotune-no-cudagraphs")
def overlay(img, labels, palette):
    print("overlay: rendering")  # CLEAN: this compile mode has no CUDA graphs
    color = palette[labels.clamp_max(palette.shape[0] - 1)].permute(0, 3, 1, 2)
    return 0.5 * img + 0.5 * color


@torch.no_grad()
def segment(model, img, palette):
    logits = run_backbone(model, img)
    labels, present = postprocess(logits)
    entropy = -(logits.softmax(1) * logits.log_softmax(1)).sum(1).mean()  # HAZARD: static-address
    return overlay(img, labels, palette), present, entropy


@torch.no_grad()
def segment_safe(model, img, palette):
    logits = run_backbone(model, img).clone()  # CLEAN: cloned before the next compiled call
    labels, present = postprocess(logits)
    entropy = -(logits.softmax(1) * logits.log_softmax(1)).sum(1).mean()
    return overlay(img, labels.clone(), palette), present.clone(), entropy


@torch.no_grad()
def evaluate(model, loader, table, n_classes=19):
    inter = torch.zeros(n_classes, device="cuda")
    union = torch.zeros(n_classes, device="cuda")
    for img, gt in loader:
        img = img.cuda(non_blocking=True)
        gt = gt.cuda(non_blocking=True).long()
        remap_(gt, table)
        logits = run_backbone(model, img)
        pred = logits.argmax(1)
        pred = F.interpolate(pred[:, None].float(), size=gt.shape[-2:], mode="nearest")[:, 0].long()
        valid = gt != IGNORE
        for c in range(n_classes):
            p, g = (pred == c) & valid, (gt == c) & valid
            inter[c] += (p & g).sum()
            union[c] += (p | g).sum()
    iou = inter / union.clamp_min(1)
    return iou.mean().item(), iou.cpu()  # CLEAN: host reads after the loop, in eager code
