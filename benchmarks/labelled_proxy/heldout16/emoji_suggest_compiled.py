"""Emoji suggestions for a cloud keyboard.

The last 24 word-piece ids typed by the user go through an LSTM language model
with an emoji head (1800 emoji). Requests are batched by the gateway into 64
rows. The serving functions are decorated with torch.compile in
"reduce-overhead" mode; the offline re-ranker uses a default compile.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("keyboard.emoji")
VOCAB, N_EMOJI, CTX, BATCH = 32000, 1800, 24, 64
EMOJI_TABLE = [chr(0x1F600 + i % 80) for i in range(N_EMOJI)]


class EmojiLM(nn.Module):
    def __init__(self, d: int = 256):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, d)
        self.lstm = nn.LSTM(d, d, num_layers=2, batch_first=True)
        self.head = nn.Linear(d, N_EMOJI)

    def forward(self, ids):
        h, _ = self.lstm(self.emb(ids))
        return self.head(h[:, -1])


model = EmojiLM().cuda().eval()
blocked = torch.zeros(N_EMOJI, dtype=torch.bool, device="cuda")     # region-specific blocklist


@torch.compile(mode="reduce-overhead")
def suggest(ids, k: int = 3):
    log.debug("suggest batch, max id %s", ids.max())  # HAZARD: host-code
    ids.clamp_(0, VOCAB - 1)  # HAZARD: static-address
    logits = model(ids).masked_fill(blocked, float("-inf"))  # CLEAN: masked_fill keeps the shape
    probs = F.softmax(logits, -1)
    top = probs.topk(k, dim=-1)  # CLEAN: fixed k, no data-dependent shape
    if probs.max() < 0.15:  # HAZARD: dynamic-control-flow
        return top.indices[:, :1], top.values[:, :1]
    return top.indices, top.values


@torch.compile(mode="reduce-overhead")
def suggest_strings(ids):
    idx = model(ids.clamp(0, VOCAB - 1)).argmax(-1)  # CLEAN: out-of-place clamp does not mutate the input
    return [EMOJI_TABLE[i] for i in idx.tolist()]  # HAZARD: host-sync


@torch.compile
def rerank_offline(ids, clicked):
    ids.clamp_(0, VOCAB - 1)  # CLEAN: default compile, no CUDA graphs
    logits = model(ids)
    hit = logits.gather(1, clicked[:, None]).squeeze(1)
    return [round(v, 3) for v in hit.tolist()]  # CLEAN: default compile, no CUDA graphs


@torch.no_grad()
def serve(batches):
    out = []
    for ids in batches:                              # gateway pads every batch to BATCH x CTX
        idx, val = suggest(ids)
        out.append((idx.clone(), val.clone()))  # CLEAN: cloned before the next replay
    return out


@torch.no_grad()
def serve_strings(ids):
    return suggest_strings(ids)


def update_blocklist(region_codes):
    blocked.zero_()
    for code in region_codes:
        blocked[code] = True


if __name__ == "__main__":
    update_blocklist([5, 17, 901])
    reqs = [torch.randint(0, VOCAB + 50, (BATCH, CTX), device="cuda") for _ in range(10)]
    print(len(serve(reqs)), serve_strings(reqs[0])[:5])
    print(rerank_offline(reqs[1], torch.randint(0, N_EMOJI, (BATCH,), device="cuda"))[:4])
