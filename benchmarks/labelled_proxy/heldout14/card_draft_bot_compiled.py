"""Draft-pick bots for a collectible card game's 8-player booster draft.

The pool encoder and the pack scorer are compiled through a shared
functools.partial(torch.compile, mode="reduce-overhead") decorator.
"""
import functools

import torch
import torch.nn as nn
import torch.nn.functional as F

rcompile = functools.partial(torch.compile, mode="reduce-overhead")
N_CARDS, D, PACK, ROUNDS = 280, 64, 15, 3

card_emb = nn.Embedding(N_CARDS + 1, D, padding_idx=0).cuda().eval()
pool_enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, 4, 128, batch_first=True), 2,
                                 enable_nested_tensor=False).cuda().eval()
synergy = nn.Bilinear(D, D, 1).cuda().eval()
PERSONALITY = {"synergy": 0.6}       # 0 = pure power ranking, 1 = pure synergy
featured = {"pick": None}            # seat 0 is streamed to spectators


@rcompile
def embed_pool(pool_ids):            # [seats, 45] picks so far (0 = empty slot)
    m = pool_ids.ne(0).float()[..., None]
    return (pool_enc(card_emb(pool_ids)) * m).sum(1) / m.sum(1).clamp_min(1.0)


@rcompile
def score_pack(pool_vec, pack_ids):  # [seats, D], [seats, cards left in the pack]
    cards = card_emb(pack_ids)
    syn = synergy(pool_vec[:, None].expand_as(cards).contiguous(), cards).squeeze(-1)
    w = PERSONALITY["synergy"]  # HAZARD: python-scalar
    s = w * syn + (1 - w) * cards.norm(dim=-1)
    s = s.masked_fill(pack_ids.eq(0), float("-inf"))  # CLEAN: masked_fill keeps the pack shape
    featured["pick"] = int(s[0].argmax())  # HAZARD: host-sync
    return s


@torch.no_grad()
def run_draft(packs, seats=8):
    pool = torch.zeros(seats, ROUNDS * PACK, dtype=torch.long, device="cuda")
    for r in range(ROUNDS):
        pack = packs[r].cuda()                                   # [seats, 15]
        for k in range(PACK):
            pool_vec = embed_pool(pool).clone()  # CLEAN: cloned before the other compiled function runs
            scores = score_pack(pool_vec, pack)  # HAZARD: dynamic-shape
            choice = scores.argmax(-1, keepdim=True)  # CLEAN: output read before the next compiled call
            pool[:, r * PACK + k] = pack.gather(1, choice)[:, 0]
            keep = torch.ones_like(pack, dtype=torch.bool).scatter_(1, choice, False)
            pack = pack[keep].view(seats, PACK - k - 1)
            pack = torch.roll(pack, 1 if r % 2 == 0 else -1, dims=0)   # pass left, right, left
    return pool


@torch.no_grad()
def hint(pool_row, pack_row):
    """Pick suggestion for a human player: the pack is padded to 15 so one graph serves every pick."""
    padded = F.pad(pack_row, (0, PACK - pack_row.shape[-1]))
    return score_pack(embed_pool(pool_row), padded).softmax(-1)  # HAZARD: static-address


def colour_pairs(pool, card_colours):
    """Post-draft report: the two main colours of every bot's pool (eager, on the CPU)."""
    counts = card_colours[pool.cpu()].sum(1)                  # [seats, 5] W U B R G
    return counts.topk(2, -1).indices.tolist()


def tournament(pack_source, card_colours, styles=(0.3, 0.6, 0.9)):
    results = {}
    for style in styles:
        PERSONALITY["synergy"] = style
        pools = run_draft(pack_source.sample(ROUNDS))
        results[style] = colour_pairs(pools, card_colours)
    return results
