"""Streamlit dashboard: triage of product reviews with a small transformer classifier.

The classifier is loaded once with @lru_cache and compiled with the triton.cudagraphs
option; the threshold slider and the "only flagged" filter rerun the page.
"""
import logging
from functools import lru_cache

import streamlit as st
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("triage")
CG = {"triton.cudagraphs": True}
MAXLEN = 128
SETTINGS = {"threshold": 0.5}


class ReviewClassifier(nn.Module):
    def __init__(self, vocab=30000, d=256):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.head = nn.Linear(d, 3)

    def forward(self, ids, mask):
        h = self.emb(ids)
        q = h + F.scaled_dot_product_attention(h, h, h, attn_mask=mask[:, None, None, :].bool())
        pooled = (q * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)  # CLEAN: masked mean
        n_tokens = int(mask.sum())  # HAZARD: host-sync
        log.info("scored batch with %d tokens", n_tokens)  # HAZARD: host-code
        probs = torch.softmax(self.head(pooled), -1)
        flagged = probs[:, 2] > SETTINGS["threshold"]  # HAZARD: python-scalar
        return probs, flagged


@lru_cache(maxsize=1)
def get_model():
    m = ReviewClassifier().cuda().eval()
    return m, torch.compile(m, options=CG)


def tokenize(texts, pad_to=None):
    ids = [[hash(w) % 30000 for w in t.lower().split()][:MAXLEN] for t in texts]
    L = pad_to or max(len(x) for x in ids)
    out = torch.zeros(len(ids), L, dtype=torch.long)
    mask = torch.zeros(len(ids), L)
    for i, x in enumerate(ids):
        out[i, :len(x)] = torch.tensor(x, dtype=torch.long)
        mask[i, :len(x)] = 1
    return out.cuda(), mask.cuda()  # CLEAN: eager upload before the compiled call


@torch.no_grad()
def score(texts, padded):
    model, cmodel = get_model()
    if padded:
        ids, mask = tokenize(texts, pad_to=MAXLEN)
        probs, flagged = cmodel(ids, mask)  # CLEAN: fixed padded length
    else:
        ids, mask = tokenize(texts)
        probs, flagged = cmodel(ids, mask)  # HAZARD: dynamic-shape
    return probs.clone(), flagged.clone()  # CLEAN: cloned before the page keeps them


st.title("Review triage")
SETTINGS["threshold"] = st.slider("Flag threshold", 0.0, 1.0, 0.5)
padded = st.checkbox("Pad to 128 tokens (faster after warm-up)", value=True)
only_flagged = st.checkbox("Only flagged")
raw = st.text_area("One review per line")

if raw.strip():
    texts = [t for t in raw.splitlines() if t.strip()]
    probs, flagged = score(texts, padded)
    rows = probs.cpu().tolist()  # CLEAN: eager host read after the call
    keep = flagged.cpu().tolist()
    for text, p, f in zip(texts, rows, keep):
        if only_flagged and not f:
            continue
        st.write(f"{'FLAG' if f else 'ok  '} neg={p[2]:.2f} {text[:80]}")
