"""Comment moderation for a forum platform.

A multi-label toxicity classifier (toxic, severe, obscene, threat, insult,
identity hate) scores every new comment; each community sets its own hide
threshold.  Phone numbers and e-mails are masked before scoring.  The fast
path swaps module-level functions for compiled versions at start-up.
"""
import torch
import torch.nn as nn

VOCAB, SEQ, BATCH, MASK_ID = 50_265, 256, 64, 4
LABELS = ["toxic", "severe", "obscene", "threat", "insult", "identity_hate"]
SEVERE = LABELS.index("severe")
THRESHOLDS = {"gaming": 0.92, "parenting": 0.6, "politics": 0.8, "default": 0.75}
COMMUNITY_IDS = {name: i for i, name in enumerate(THRESHOLDS)}


class ToxicityClassifier(nn.Module):
    def __init__(self, d=512):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, d, padding_idx=1)
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 8, 2048, batch_first=True), 6)
        self.cls = nn.Linear(d, len(LABELS))

    def forward(self, ids):
        return self.cls(self.enc(self.emb(ids))[:, 0])


def mask_pii(ids, pii_mask):
    ids.masked_fill_(pii_mask, MASK_ID)  # HAZARD: static-address
    return ids


def moderate(model, ids, threshold):
    probs = torch.sigmoid(model(ids))
    hide = probs.amax(-1) > threshold  # HAZARD: python-scalar
    if probs[:, SEVERE].max() > 0.99:  # HAZARD: dynamic-control-flow
        hide = hide | (probs[:, SEVERE] > 0.5)
    return hide.tolist(), probs  # HAZARD: host-sync


def moderate_mixed(model, ids, community_idx, thresholds):
    probs = torch.sigmoid(model(ids))
    thr = thresholds[community_idx]
    hide = probs.amax(-1) > thr  # CLEAN: per-comment thresholds gathered from a device tensor
    hide = hide | torch.where(probs[:, SEVERE] > 0.99, True, False)  # CLEAN: branch-free escalation
    return hide, probs


def enable_fast_path():
    global moderate, mask_pii, moderate_mixed
    moderate = torch.compile(moderate, mode="reduce-overhead")
    mask_pii = torch.compile(mask_pii, mode="reduce-overhead")
    moderate_mixed = torch.compile(moderate_mixed, mode="reduce-overhead")


class ModerationWorker:
    def __init__(self, model):
        self.model = model.cuda().eval()
        self.thr = torch.tensor(list(THRESHOLDS.values()), device="cuda")  # CLEAN: built once, outside the compiled code

    @torch.inference_mode()
    def per_community(self, community, ids, pii_mask):
        ids = mask_pii(ids, pii_mask)
        hide, probs = moderate(self.model, ids, THRESHOLDS.get(community, THRESHOLDS["default"]))
        return hide, probs.clone()

    @torch.inference_mode()
    def firehose(self, ids, pii_mask, community_idx):
        ids = torch.where(pii_mask, torch.full_like(ids, MASK_ID), ids)  # CLEAN: out-of-place masking, eager
        hide, probs = moderate_mixed(self.model, ids, community_idx, self.thr)
        return hide.cpu(), probs.clone()  # CLEAN: read right after the call, outside the compiled code


if __name__ == "__main__":
    enable_fast_path()
    w = ModerationWorker(ToxicityClassifier())
    for community in ("gaming", "parenting", "gaming", "politics"):
        ids = torch.randint(5, VOCAB, (BATCH, SEQ), device="cuda")
        pii = torch.rand(BATCH, SEQ, device="cuda") < 0.01
        w.per_community(community, ids, pii)
    ids = torch.randint(5, VOCAB, (BATCH, SEQ), device="cuda")
    w.firehose(ids, torch.zeros_like(ids, dtype=torch.bool), torch.randint(0, len(THRESHOLDS), (BATCH,), device="cuda"))
