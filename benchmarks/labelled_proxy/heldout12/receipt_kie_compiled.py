"""Key-information extraction from receipt photos for an expense app.

OCR tokens with their boxes go through a small layout-aware encoder that
tags merchant, date, total, tax and currency fields. Amounts are converted
to the account currency on the GPU. The encoder's forward is swapped for a
max-autotune compiled version when the worker starts.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, D, N_FIELDS, MAX_TOK = 30000, 256, 11, 512


class LayoutBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.o = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.ff = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))
        self.n1, self.n2 = nn.LayerNorm(D), nn.LayerNorm(D)

    def forward(self, h, pad):
        q, k, v = self.qkv(self.n1(h)).view(h.shape[0], h.shape[1], 3, 8, D // 8).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           attn_mask=~pad[:, None, None, :])
        h = h + self.o(a.transpose(1, 2).flatten(2))
        return h + self.ff(self.n2(h))


class ReceiptTagger(nn.Module):
    def __init__(self, layers=4):
        super().__init__()
        self.tok, self.box = nn.Embedding(VOCAB, D, padding_idx=0), nn.Linear(4, D)
        self.blocks = nn.ModuleList(LayoutBlock() for _ in range(layers))
        self.cls = nn.Linear(D, N_FIELDS)

    def forward(self, ids, boxes):
        print("tagging receipt, first tokens:", ids[0, :8])  # HAZARD: host-code
        pad = ids == 0
        h = self.tok(ids) + self.box(boxes)
        for blk in self.blocks:
            h = blk(h, pad)
        return self.cls(h)


@torch.compile(mode="reduce-overhead")
def to_account_currency(amounts, fx_rate):
    return torch.round(amounts * fx_rate * 100.0) / 100.0


@torch.compile(mode="max-autotune")
def decode_fields(probs):
    tags = probs.argmax(-1)
    return tags.tolist()  # HAZARD: host-sync


@torch.compile(mode="max-autotune-no-cudagraphs")
def field_confidence(probs):
    return probs.amax(-1).mean().item()  # CLEAN: compiled without CUDA graphs


@torch.no_grad()
def extract(model, ids, boxes, amounts, fx_rate):
    logits = model(ids, boxes)
    total_eur = to_account_currency(amounts, fx_rate).clone()
    probs = logits.softmax(-1)  # HAZARD: static-address
    return decode_fields(probs), total_eur, field_confidence(probs)


@torch.no_grad()
def extract_batch(model, ids, boxes, amounts, fx_rate):
    logits = model(ids, boxes).clone()  # CLEAN: cloned before the next compiled function runs
    total_eur = to_account_currency(amounts, fx_rate).clone()
    return decode_fields(logits.softmax(-1)), total_eur


def pad_to(x, n):
    return F.pad(x, (0, 0, 0, n - x.shape[1])) if x.dim() == 3 else F.pad(x, (0, n - x.shape[1]))


if __name__ == "__main__":
    model = ReceiptTagger().cuda().eval()
    model.forward = torch.compile(model.forward, mode="max-autotune")
    fx = torch.tensor([1.0], device="cuda")
    for receipt in range(500):
        n = int(torch.randint(40, MAX_TOK, ()))
        ids = torch.randint(1, VOCAB, (1, n), device="cuda")
        boxes = torch.rand(1, n, 4, device="cuda")
        amounts = torch.rand(1, 8, device="cuda") * 200.0
        fields, eur, conf = extract(model, ids, boxes, amounts, fx)  # HAZARD: dynamic-shape
    queue = [(torch.randint(1, VOCAB, (1, 300), device="cuda"), torch.rand(1, 300, 4, device="cuda")) for _ in range(32)]
    ids = torch.cat([pad_to(i, MAX_TOK) for i, _ in queue])
    boxes = torch.cat([pad_to(b, MAX_TOK) for _, b in queue])
    fields, eur = extract_batch(model, ids, boxes, torch.rand(32, 8, device="cuda"), fx)  # CLEAN: padded to MAX_TOK
