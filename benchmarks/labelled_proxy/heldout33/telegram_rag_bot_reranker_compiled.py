"""Telegram FAQ bot for a small shop: retrieve candidate answers with BM25, rerank them with
a tiny cross-encoder compiled with backend="cudagraphs", reply with the best one.
"""
import os
import re

import torch
import torch.nn as nn
from telegram import Update
from telegram.ext import ApplicationBuilder, ContextTypes, MessageHandler, filters

VOCAB, D, L, TOP_N = 30000, 128, 96, 16
FAQ = [("shipping", "We ship in 2-3 days."), ("returns", "Returns within 30 days."),
       ("hours", "Open 9-18 Mon-Sat."), ("payment", "Cards and PayPal.")]


def tok(text):
    return [hash(w) % VOCAB for w in re.findall(r"\w+", text.lower())]


class CrossEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.mix = nn.Sequential(nn.Linear(D, D), nn.GELU(), nn.Linear(D, 1))

    def forward(self, pair_ids, lengths):
        e = self.emb(pair_ids)
        lengths.clamp_(min=1)  # HAZARD: static-address
        mask = torch.arange(pair_ids.shape[1], device=e.device)[None] < lengths[:, None]
        pooled = (e * mask[..., None]).sum(1) / lengths[:, None]  # CLEAN: masked mean pooling
        scores = self.mix(pooled).squeeze(-1)
        if scores.max() < -5:  # HAZARD: dynamic-control-flow
            scores = scores + 5
        order = scores.argsort(descending=True).tolist()  # HAZARD: host-sync
        return scores, order

    def forward_dense(self, pair_ids, lengths):
        e = self.emb(pair_ids)
        mask = torch.arange(pair_ids.shape[1], device=e.device)[None] < lengths.clamp(min=1)[:, None]  # CLEAN: out-of-place clamp
        return self.mix((e * mask[..., None]).sum(1)).squeeze(-1)


model = CrossEncoder().cuda().eval()
rerank = torch.compile(model, backend="cudagraphs")
rerank_dense = torch.compile(model.forward_dense, backend="cudagraphs")


def candidates(question):
    q = set(tok(question))
    ranked = sorted(FAQ, key=lambda kv: -len(q & set(tok(kv[0] + " " + kv[1]))))
    hits = [kv for kv in ranked if q & set(tok(kv[0] + " " + kv[1]))]
    return (hits or ranked[:1])[:TOP_N]


def build_pairs(question, cands, pad_to=None):
    rows = [(tok(question) + tok(a))[:L] for _, a in cands]
    n = pad_to or len(rows)
    ids = torch.zeros(n, L, dtype=torch.long)
    lens = torch.zeros(n, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = torch.tensor(r)
        lens[i] = len(r)
    return ids.cuda(), lens.cuda()  # CLEAN: eager upload before the compiled call


@torch.no_grad()
def answer(question, dense=True):
    cands = candidates(question)
    if dense:
        ids, lens = build_pairs(question, cands, pad_to=TOP_N)
        scores = rerank_dense(ids, lens)[: len(cands)]  # CLEAN: fixed TOP_N shape
        return cands[int(scores.argmax())][1]  # CLEAN: eager host read after the call
    ids, lens = build_pairs(question, cands)
    scores, order = rerank(ids, lens)  # HAZARD: dynamic-shape
    return cands[order[0]][1]


async def on_text(update: Update, context: ContextTypes.DEFAULT_TYPE):
    reply = answer(update.message.text, dense=os.environ.get("RERANK_DENSE", "1") == "1")
    await update.message.reply_text(reply)


if __name__ == "__main__":
    app = ApplicationBuilder().token(os.environ["TG_TOKEN"]).build()
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, on_text))
    app.run_polling()
