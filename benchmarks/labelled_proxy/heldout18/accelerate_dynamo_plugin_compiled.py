"""Accelerate-style `prepare()` with a `DynamoPlugin` dataclass.

The training preset compiles the model and the optimizer step with
mode="max-autotune"; the evaluation preset uses "max-autotune-no-cudagraphs". The
collator pads each batch to its longest sequence, as most fine-tuning scripts do.
"""
import logging
from dataclasses import asdict, dataclass
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

logger = logging.getLogger("mini_accelerate")


@dataclass
class DynamoPlugin:
    backend: str = "inductor"
    mode: str = "default"
    fullgraph: bool = False
    dynamic: Optional[bool] = None


TRAIN_PRESET = DynamoPlugin(mode="max-autotune")
EVAL_PRESET = DynamoPlugin(mode="max-autotune-no-cudagraphs")


class SeqClassifier(nn.Module):
    def __init__(self, vocab, d, n_cls):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.enc = nn.GRU(d, d, batch_first=True)
        self.cls = nn.Linear(d, n_cls)

    def forward(self, input_ids, attention_mask):
        if attention_mask.sum() == 0:  # HAZARD: dynamic-control-flow
            return self.cls.bias.expand(input_ids.size(0), -1)
        h, _ = self.enc(self.emb(input_ids))
        m = attention_mask.unsqueeze(-1).to(h.dtype)
        logger.info("masked fraction %s", 1 - attention_mask.float().mean())  # HAZARD: host-code
        pooled = (h * m).sum(1) / m.sum(1).clamp_min(1.0)
        return self.cls(pooled)


class MiniAccelerator:
    def __init__(self, plugin: DynamoPlugin = TRAIN_PRESET):
        self.plugin = plugin

    def prepare(self, model, optimizer=None):
        model = torch.compile(model.cuda(), **asdict(self.plugin))
        if optimizer is not None:
            optimizer.step = torch.compile(optimizer.step, mode=self.plugin.mode)
        return model, optimizer


def evaluate(model, loader):
    eval_model, _ = MiniAccelerator(EVAL_PRESET).prepare(model)
    correct = total = 0
    with torch.no_grad():
        for batch in loader:
            logits = eval_model(batch["input_ids"].cuda(), batch["attention_mask"].cuda())  # CLEAN: no-cudagraphs preset, ragged batches are fine
            correct += (logits.argmax(-1).cpu() == batch["labels"]).sum().item()
            total += batch["labels"].numel()
    return correct / max(total, 1)


def train(model, loader, epochs=3, base_lr=2e-5, warmup_steps=500):
    optimizer = torch.optim.AdamW(model.parameters(), lr=base_lr)
    model, optimizer = MiniAccelerator().prepare(model, optimizer)
    step = 0
    for epoch in range(epochs):
        for batch in loader:
            ids = batch["input_ids"].cuda(non_blocking=True)
            mask = batch["attention_mask"].cuda(non_blocking=True)
            labels = batch["labels"].cuda(non_blocking=True)
            logits = model(ids, mask)  # HAZARD: dynamic-shape
            loss = F.cross_entropy(logits, labels)
            loss.backward()
            loss_val = loss.detach().clone()  # CLEAN: cloned before the compiled step runs
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            scale = min(1.0, step / warmup_steps)
            for group in optimizer.param_groups:
                group["lr"] = base_lr * scale  # HAZARD: optimizer
            if step % 100 == 0:
                print(f"epoch {epoch} step {step} loss {loss_val.item():.4f}")  # CLEAN: eager read of a clone
    return model
