"""Document layout analysis (text / title / list / table / figure blocks) with a DETR-lite head.

Compiled with CUDA graphs through a module-level inductor options dict.
"""
import time
import torch
import torch.nn as nn
import torchvision

CG = {"triton.cudagraphs": True, "epilogue_fusion": True}
CLASSES = ["text", "title", "list", "table", "figure"]
MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


class LayoutDETR(nn.Module):
    def __init__(self, n_queries=100, dim=256):
        super().__init__()
        r50 = torchvision.models.resnet50(weights=None)
        self.backbone = nn.Sequential(*list(r50.children())[:-2])
        self.proj = nn.Conv2d(2048, dim, 1)
        self.decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(dim, 8, 1024, batch_first=True), 6)
        self.queries = nn.Parameter(torch.randn(n_queries, dim))
        self.cls = nn.Linear(dim, len(CLASSES) + 1)
        self.box = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, 4))
        self.register_buffer("mean", MEAN.clone())
        self.register_buffer("std", STD.clone())

    def forward(self, pages):  # (B, 3, 1024, 768) in [0, 1]
        pages.sub_(self.mean).div_(self.std)  # HAZARD: static-address
        mem = self.proj(self.backbone(pages)).flatten(2).transpose(1, 2)
        hs = self.decoder(self.queries.expand(pages.shape[0], -1, -1), mem)
        return self.cls(hs), self.box(hs).sigmoid()


def postprocess(logits, boxes, score_thresh=0.5):
    stamp = time.perf_counter()  # HAZARD: host-code
    scores, labels = logits.softmax(-1)[..., :-1].max(-1)
    keep = scores[0] > score_thresh
    kept = torch.cat([boxes[0], labels[0, :, None].float(), scores[0, :, None]], -1)[keep]  # HAZARD: dynamic-shape
    names = [CLASSES[i] for i in kept[:, 4].long().tolist()]  # HAZARD: host-sync
    return kept, names, stamp


def postprocess_dense(logits, boxes, score_thresh=0.5):
    scores, labels = logits.softmax(-1)[..., :-1].max(-1)
    scores = torch.where(scores > score_thresh, scores, torch.zeros_like(scores))  # CLEAN: fixed-shape masking with torch.where
    return torch.cat([boxes, labels[..., None].float(), scores[..., None]], -1)


detector = LayoutDETR().cuda().eval()
detect = torch.compile(detector, options=CG)
post = torch.compile(postprocess, options=CG)
post_dense = torch.compile(postprocess_dense, options=CG)
post_offline = torch.compile(postprocess)  # CLEAN: default torch.compile, no CUDA graphs


@torch.no_grad()
def run_pages(batches):
    results = []
    for pages in batches:
        logits, boxes = detect(pages)
        results.append(post(logits, boxes))
    return results


@torch.no_grad()
def export_layout(batches):
    pages_out = []
    for pages in batches:
        logits, boxes = detect(pages.clone())
        dets = post_dense(logits, boxes).cpu()
        for page in dets:
            page = page[page[:, 5] > 0]
            names = [CLASSES[i] for i in page[:, 4].long().tolist()]  # CLEAN: .tolist() in eager code after the compiled call
            pages_out.append(list(zip(names, page[:, :4].tolist())))
    return pages_out


@torch.no_grad()
def archive_batch(batches):
    return [post_offline(*detector(p.clone())) for p in batches]
