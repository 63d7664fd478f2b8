"""Batch scoring service: the hot path is a reduce-overhead compiled function."""
import logging

import torch
import torch.nn as nn

logger = logging.getLogger(__name__)


class Scorer(nn.Module):
    def __init__(self, d_in=256, n_labels=64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, 512), nn.ReLU(), nn.Linear(512, n_labels))

    def forward(self, x):
        return self.net(x)


@torch.compile(mode="reduce-overhead")
def score_batch(model, feats, mask):
    logits = model(feats)
    logits = logits.masked_fill(~mask, float("-inf"))  # CLEAN: masked_fill keeps a static shape
    probs = logits.softmax(-1)
    best = probs.max(-1).values
    if best.mean() < 0.2:  # HAZARD: dynamic-control-flow
        logger.warning("low-confidence batch")  # HAZARD: host-code
    selected = probs[mask]  # HAZARD: dynamic-shape
    return probs, selected.sum()


def postprocess(probs, k=5):
    top = probs.topk(k, dim=-1)
    return top.indices.cpu().tolist()  # CLEAN: postprocess runs eagerly, after the compiled call


def serve_forever(queue, model):
    model = model.cuda().eval()
    with torch.inference_mode():
        while True:
            item = queue.get()
            if item is None:
                break
            feats, mask = item["feats"].cuda(), item["mask"].cuda()
            probs, mass = score_batch(model, feats, mask)
            item["reply"](postprocess(probs), float(mass))
