"""Entropy-based early-exit text classifier (DeeBERT-style) for an intent service.

The model is compiled through a project-wide `compile_cg` partial
(mode="max-autotune", dynamic=False) and served per request batch.
"""
import functools
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

logger = logging.getLogger("intent.exit")
compile_cg = functools.partial(torch.compile, mode="max-autotune", dynamic=False)


def entropy(logits):
    p = logits.float().softmax(-1)
    return -(p * p.clamp_min(1e-9).log()).sum(-1)


class EarlyExitEncoder(nn.Module):
    def __init__(self, vocab=30522, d=384, layers=12, n_labels=150, max_len=512, thr=0.25):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(max_len, d))
        self.layers = nn.ModuleList(nn.TransformerEncoderLayer(d, 6, 4 * d, batch_first=True) for _ in range(layers))
        self.exits = nn.ModuleList(nn.Linear(d, n_labels) for _ in range(layers))
        self.n_labels, self.entropy_thr = n_labels, thr

    def forward(self, ids, mask):
        logger.debug("early-exit forward, seq_len=%d", ids.shape[1])  # HAZARD: host-code
        kpm = None if mask.all() else ~mask  # HAZARD: dynamic-control-flow
        h = self.embed(ids) + self.pos[: ids.shape[1]]  # CLEAN: slice bound is a static shape, not a tensor value
        final = torch.zeros(ids.shape[0], self.n_labels, device=ids.device)
        exited = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)
        for layer, head in zip(self.layers, self.exits):
            h = layer(h, src_key_padding_mask=kpm)
            logits = head(h[:, 0])
            done = entropy(logits) < self.entropy_thr
            final = torch.where((done & ~exited)[:, None], logits, final)  # CLEAN: per-sample exit chosen on device
            exited = exited | done
            if int(exited.sum().item()) == ids.shape[0]:  # HAZARD: host-sync
                break
        return torch.where(exited[:, None], final, logits)


def exit_histogram(model, ids, mask):
    h = model.embed(ids) + model.pos[: ids.shape[1]]
    layers_used = []
    for i, (layer, head) in enumerate(zip(model.layers, model.exits)):
        h = layer(h, src_key_padding_mask=~mask)
        layers_used.append(float((entropy(head(h[:, 0])) < model.entropy_thr).float().mean().item()))  # CLEAN: default-mode compile
    return layers_used


class IntentServer:
    def __init__(self, model, buckets=(32, 64, 128, 256, 512)):
        self.model = compile_cg(model.eval().cuda())
        self.profile = torch.compile(exit_histogram)
        self.raw_model = model
        self.buckets = buckets

    @torch.no_grad()
    def classify(self, ids, mask):
        return self.model(ids, mask).argmax(-1)  # HAZARD: dynamic-shape

    @torch.no_grad()
    def classify_bucketed(self, ids, mask):
        length = next(b for b in self.buckets if b >= ids.shape[1])
        pad = length - ids.shape[1]
        ids, mask = F.pad(ids, (0, pad)), F.pad(mask, (0, pad), value=False)
        return self.model(ids, mask).argmax(-1)  # CLEAN: padded to a fixed bucket length

    @torch.no_grad()
    def exit_profile(self, ids, mask):
        return self.profile(self.raw_model, ids, mask)
