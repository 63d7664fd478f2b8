"""Hierarchical long-document classifier trained with gradient accumulation.

Documents are split into 256-token chunks; a chunk encoder runs over all chunks of
a micro-batch and a doc-level attention pool aggregates them. The model's forward
is replaced by a reduce-overhead compiled version; the optimizer step is compiled too.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

logger = logging.getLogger("longdoc")
CHUNK, MAX_CHUNKS_PER_MB = 256, 96


class HierDocClassifier(nn.Module):
    def __init__(self, vocab=50265, d=512, layers=4, n_labels=20, max_docs=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, d, padding_idx=1)
        enc = nn.TransformerEncoderLayer(d, 8, 4 * d, batch_first=True)
        self.chunk_enc = nn.TransformerEncoder(enc, layers)
        self.pool_q = nn.Parameter(torch.randn(d))
        self.cls = nn.Linear(d, n_labels)
        self.max_docs = max_docs

    def forward(self, chunk_ids, doc_index):
        logger.debug("micro-batch with %d chunks", chunk_ids.shape[0])  # HAZARD: host-code
        h = self.chunk_enc(self.embed(chunk_ids))[:, 0]
        score = h @ self.pool_q
        w = torch.zeros(self.max_docs, h.shape[0], device=h.device)
        w[doc_index, torch.arange(h.shape[0], device=h.device)] = 1.0  # CLEAN: device index tensors, no host copy
        w = torch.softmax(score[None].masked_fill(w == 0, -1e4), -1)
        return self.cls(w @ h)


def pad_chunks(chunk_ids, doc_index, n=MAX_CHUNKS_PER_MB, pad_doc=7):
    extra = n - chunk_ids.shape[0]
    ids = F.pad(chunk_ids, (0, 0, 0, extra), value=1)
    idx = F.pad(doc_index, (0, extra), value=pad_doc)
    return ids, idx


def train(model, loader, base_lr=3e-4, warmup=1000, accum=4):
    model = model.cuda()
    model.forward = torch.compile(model.forward, mode="reduce-overhead")
    opt = torch.optim.AdamW(model.parameters(), lr=base_lr, weight_decay=0.01)

    @torch.compile(mode="reduce-overhead")
    def opt_step():
        opt.step()

    seen_logits = []
    for step, micro_batches in enumerate(loader):
        for group in opt.param_groups:
            group["lr"] = base_lr * min(1.0, (step + 1) / warmup)  # HAZARD: optimizer
        for chunk_ids, doc_index, labels in micro_batches[:accum]:
            torch.compiler.cudagraph_mark_step_begin()
            logits = model(chunk_ids.cuda(), doc_index.cuda())  # HAZARD: dynamic-shape
            loss = F.cross_entropy(logits[: labels.shape[0]], labels.cuda()) / accum
            loss.backward()
            seen_logits.append(logits.detach())  # HAZARD: static-address
        opt_step()
        opt.zero_grad(set_to_none=True)
    return seen_logits


@torch.no_grad()
def evaluate(model, loader):
    correct = total = 0
    for chunk_ids, doc_index, labels in loader:
        ids, idx = pad_chunks(chunk_ids.cuda(), doc_index.cuda())
        logits = model(ids, idx)  # CLEAN: chunks padded to a fixed count, one graph
        correct += (logits[: labels.shape[0]].argmax(-1).cpu() == labels).sum().item()  # CLEAN: eager metric outside the compiled forward
        total += labels.shape[0]
    return correct / total
