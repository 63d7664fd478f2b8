"""NLU for a smart-speaker voice assistant: intent detection + slot filling.

A BiGRU utterance encoder, an intent head and a BIO slot tagger are graphed
together with torch.cuda.make_graphed_callables for the server-side retraining
job (48-token utterances, batch 256). New intents are hot-added between epochs
from the product team's intent catalogue.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

T, B, V, D = 48, 256, 20000, 256
N_INTENTS, N_SLOTS = 64, 41


class UtteranceEncoder(nn.Module):
    def __init__(self, word_drop=0.1):
        super().__init__()
        self.emb = nn.Embedding(V, D, padding_idx=0)
        self.gru = nn.GRU(D, D // 2, batch_first=True, bidirectional=True)
        self.word_drop = word_drop

    def forward(self, ids):
        e = self.emb(ids)
        if np.random.rand() < 0.5:  # HAZARD: host-code
            e = F.dropout(e, self.word_drop, training=self.training)
        h, _ = self.gru(e)
        if torch.isnan(h).any():  # HAZARD: dynamic-control-flow
            h = torch.nan_to_num(h)
        return h


class IntentHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(D, N_INTENTS)

    def forward(self, h):
        return self.proj(torch.nan_to_num(h).mean(1))  # CLEAN: unconditional nan_to_num, no branch on a tensor


class SlotTagger(nn.Module):
    def __init__(self, slot_ids):
        super().__init__()
        self.slot_ids = slot_ids  # python list: slot labels active for this locale
        self.proj = nn.Linear(D, N_SLOTS)

    def forward(self, h):
        active = torch.tensor(self.slot_ids, device=h.device)  # HAZARD: host-sync
        bias = torch.full((N_SLOTS,), -1e4, device=h.device).index_fill(0, active, 0.0)
        return self.proj(h) + bias


def build(slot_ids, device="cuda"):
    mods = (UtteranceEncoder().to(device), IntentHead().to(device), SlotTagger(slot_ids).to(device))
    ids = torch.randint(1, V, (B, T), device=device)
    h1 = torch.randn(B, T, D, device=device, requires_grad=True)
    h2 = torch.randn(B, T, D, device=device, requires_grad=True)
    return torch.cuda.make_graphed_callables(mods, ((ids,), (h1,), (h2,)))


def add_intents(intent_head, rows, bias):
    # product ships new intents: catalogue rows replace the unused tail of the head
    weight = intent_head.proj.weight.detach().clone()
    weight[-rows.shape[0]:] = rows
    intent_head.proj.weight = nn.Parameter(weight.cuda())  # HAZARD: static-address
    with torch.no_grad():
        intent_head.proj.bias.copy_(bias)  # CLEAN: in-place copy keeps the graphed parameter's address


def train(loader, slot_ids, catalogue, epochs=6):
    enc, ih, st = build(slot_ids)
    opt = torch.optim.AdamW([*enc.parameters(), *ih.parameters(), *st.parameters()], lr=1e-3)
    for epoch in range(epochs):
        for ids, intent, slots in loader:
            h = enc(ids)
            li = F.cross_entropy(ih(h), intent)  # CLEAN: positional tensor in the sample_args layout
            ls = F.cross_entropy(st(h).transpose(1, 2), slots, ignore_index=-100)
            opt.zero_grad(set_to_none=True)
            (li + ls).backward()
            opt.step()
        if epoch == 2:
            add_intents(ih, *catalogue.load_new_rows())
    return enc, ih, st


if __name__ == "__main__":
    import intent_catalogue

    data = torch.load("assistant_utterances_en_us.pt")
    loader = torch.utils.data.DataLoader(data, batch_size=B, shuffle=True, drop_last=True)
    locale_slots = [0, 1, 2, 3, 4, 7, 8, 11, 12, 15, 16, 21, 22, 30, 31, 40]
    train(loader, locale_slots, catalogue=intent_catalogue)
