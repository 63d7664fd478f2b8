import time
from collections import defaultdict

import torch

METRICS = defaultdict(list)
PAD_ID = 0


@torch.compile(mode="reduce-overhead")
def score_batch(logits, labels, mask):
    t0 = time.time()  # HAZARD: host-code
    pred = logits.argmax(-1)
    correct = (pred == labels) & mask
    acc = correct.sum().float() / mask.sum().clamp(min=1)
    acc_value = acc.item()  # HAZARD: host-sync
    METRICS["acc"].append(acc_value)  # HAZARD: host-code
    METRICS["latency_ms"].append((time.time() - t0) * 1e3)  # HAZARD: host-code
    return acc, pred


@torch.compile(mode="reduce-overhead", fullgraph=False)
def token_f1(pred_ids, gold_ids):
    valid = gold_ids != PAD_ID  # CLEAN: comparison with a constant int module global that never changes
    tp = ((pred_ids == gold_ids) & valid).sum(-1).float()
    precision = tp / (pred_ids != PAD_ID).sum(-1).clamp(min=1)
    recall = tp / valid.sum(-1).clamp(min=1)
    f1 = 2 * precision * recall / (precision + recall + 1e-8)
    print(f"batch f1 {f1.mean()}")  # HAZARD: host-sync
    return f1


def evaluate(model, loader):
    model.eval()
    total_f1, n = 0.0, 0
    with torch.no_grad():
        for batch in loader:
            input_ids = batch["input_ids"].cuda(non_blocking=True)
            labels = batch["labels"].cuda(non_blocking=True)
            logits = model(input_ids)
            acc, pred = score_batch(logits, labels, labels != PAD_ID)
            f1 = token_f1(pred, labels)
            total_f1 += f1.sum().item()  # CLEAN: .item() on the returned tensor, outside the compiled function
            n += f1.numel()
    return {"f1": total_f1 / max(n, 1), "acc": sum(METRICS["acc"]) / max(len(METRICS["acc"]), 1)}
