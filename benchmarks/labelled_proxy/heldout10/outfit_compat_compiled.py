"""Outfit compatibility for a fashion app's "complete the look" feature.

Item photos are embedded by a small CNN into type-aware subspaces (tops, shoes,
bags, ...); an outfit scorer attends over the items (up to 8) and predicts how
well they go together. At start-up both stage functions are swapped for their
reduce-overhead compiled versions.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("outfits")
MAX_ITEMS, N_TYPES, EMB = 8, 12, 64


class ItemEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.cnn = nn.Sequential(
            nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, EMB),
        )
        self.type_masks = nn.Parameter(torch.rand(N_TYPES, EMB))

    def forward(self, imgs):  # (B, I, 3, 96, 96)
        b, i = imgs.shape[:2]
        return self.cnn(imgs.flatten(0, 1)).view(b, i, EMB)


class OutfitScorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(EMB, 4, batch_first=True)
        self.out = nn.Linear(EMB, 1)

    def forward(self, emb, valid):
        h, _ = self.attn(emb, emb, emb, key_padding_mask=~valid, need_weights=False)
        pooled = (h * valid.unsqueeze(-1)).sum(1) / valid.sum(1, keepdim=True).clamp_min(1)  # CLEAN: the count stays a device tensor, no host read
        return torch.sigmoid(self.out(pooled)).squeeze(-1)


def embed_items(encoder, imgs, types):
    z = encoder(imgs)
    masks = F.one_hot(types, N_TYPES).float() @ torch.sigmoid(encoder.type_masks)
    log.debug("embedded %d outfits", imgs.shape[0])  # HAZARD: host-code
    return F.normalize(z * masks, dim=-1)


def score_outfits(scorer, emb, valid):
    n = int(valid.sum(1).max())  # HAZARD: host-sync
    return scorer(emb[:, :n], valid[:, :n])


def init_compiled():
    global embed_items, score_outfits
    embed_items = torch.compile(embed_items, mode="reduce-overhead")
    score_outfits = torch.compile(score_outfits, mode="reduce-overhead")


def complete_the_look(encoder, scorer, imgs, types, valid):
    """Candidate outfits around one seed garment; the item count depends on the garment."""
    with torch.no_grad():
        emb = embed_items(encoder, imgs, types)  # HAZARD: dynamic-shape
        return score_outfits(scorer, emb, valid)  # HAZARD: static-address


def nightly_lookbook(encoder, scorer, loader):
    scores = []
    with torch.no_grad():
        for imgs, types, valid in loader:  # padded to MAX_ITEMS, 256 outfits per batch
            emb = embed_items(encoder, imgs, types).clone()  # CLEAN: cloned before it is handed to the next compiled function
            scores.append(score_outfits(scorer, emb, valid).clone())  # CLEAN: kept only as a clone
    return torch.cat(scores)


if __name__ == "__main__":
    ckpt = torch.load("outfit_compat.pt", map_location="cuda")
    encoder, scorer = ItemEncoder().cuda().eval(), OutfitScorer().cuda().eval()
    encoder.load_state_dict(ckpt["encoder"])
    scorer.load_state_dict(ckpt["scorer"])
    init_compiled()
    lookbook = nightly_lookbook(encoder, scorer, torch.load("lookbook_batches.pt"))
