"""Per-batch retrieval metrics for an embedding model, compiled for the evaluation loop."""
import logging

import torch
import torch.nn.functional as F

logger = logging.getLogger("eval")


def calibrate(val_scores, val_labels):
    grid = torch.linspace(0.1, 0.9, 17).tolist()
    return max((float(((val_scores > t) == val_labels).float().mean()), t) for t in grid)[1]


@torch.compile(mode="reduce-overhead")
def batch_metrics(q_emb, d_emb, labels, threshold):
    scores = F.normalize(q_emb, dim=-1) @ F.normalize(d_emb, dim=-1).T
    diag = scores.diagonal()
    pred = diag > threshold  # HAZARD: python-scalar
    tp = (pred & labels).sum()
    pp = pred.sum()
    precision = tp / max(pp.item(), 1)  # HAZARD: host-sync
    rank = (scores > diag[:, None]).sum(-1)
    mrr = (1.0 / (rank + 1).float()).mean()
    hits = torch.where(rank < 10, 1.0, 0.0).mean()  # CLEAN: fixed-shape select on device
    distinct = torch.unique(scores.argmax(-1)).numel()  # HAZARD: dynamic-shape
    logger.info("computed batch metrics")  # HAZARD: host-code
    return precision, mrr, hits, distinct


@torch.compile(mode="max-autotune-no-cudagraphs")
def batch_recall(q_emb, d_emb, k: int = 5):
    scores = q_emb @ d_emb.T
    topk = scores.topk(k, dim=-1).indices
    target = torch.arange(scores.shape[0], device=scores.device)[:, None]
    hit_rate = (topk == target).any(-1).float().mean().item()  # CLEAN: no CUDA graphs under max-autotune-no-cudagraphs
    return hit_rate


def evaluate(model, loader, calib_scores, calib_labels):
    model.eval()
    rows = []
    threshold = calibrate(calib_scores, calib_labels)
    with torch.no_grad():
        for q, d, labels in loader:
            q_emb, d_emb = model(q.cuda()), model(d.cuda())
            precision, mrr, hits, distinct = batch_metrics(q_emb, d_emb, labels.cuda().bool(), threshold)
            rows.append({"p": precision.item(), "mrr": mrr.item(), "hits": hits.item()})  # CLEAN: host reads after the compiled call returns
            rows[-1]["recall@5"] = batch_recall(q_emb, d_emb)
            threshold = 0.95 * threshold + 0.05 * rows[-1]["p"]  # adaptive operating point
    return rows
