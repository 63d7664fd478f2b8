"""Non-autoregressive OCR post-correction for digitised 19th-century newspapers.

Every character of a noisy OCR line gets an edit tag: KEEP, DELETE, or REPLACE_<c>
(GECToR-style tagging, one pass, no decoding loop). A character CNN + transformer
encoder predicts the tags; inference is a compiled lambda with mode="reduce-overhead".
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

CHARS = " abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:'\"!?-()&$%/"
PAD, UNK = 0, 1
STOI = {c: i + 2 for i, c in enumerate(CHARS)}
N_TAGS = 2 + len(CHARS)  # KEEP, DELETE, REPLACE_c
MAX_LEN = 128


def encode(lines, width=None):
    width = width or max(len(l) for l in lines)
    ids = torch.full((len(lines), width), PAD, dtype=torch.long)
    for i, line in enumerate(lines):
        ids[i, :len(line[:width])] = torch.tensor([STOI.get(c, UNK) for c in line[:width]])
    return ids.cuda()


class EditTagger(nn.Module):
    def __init__(self, d=256, layers=4):
        super().__init__()
        self.emb = nn.Embedding(len(CHARS) + 2, d, padding_idx=PAD)
        self.conv = nn.Conv1d(d, d, 5, padding=2)
        layer = nn.TransformerEncoderLayer(d, 8, 4 * d, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.out = nn.Linear(d, N_TAGS)

    def forward(self, ids):
        print("unknown-char rate", (ids == UNK).float().mean())  # HAZARD: host-code
        if (ids == UNK).all():  # HAZARD: dynamic-control-flow
            return torch.zeros(*ids.shape, N_TAGS, device=ids.device)
        h = self.emb(ids)
        h = h + F.gelu(self.conv(h.transpose(1, 2))).transpose(1, 2)
        return self.out(self.enc(h, src_key_padding_mask=ids == PAD))


def apply_tags(line, tags):
    out = []
    for c, t in zip(line, tags):
        if t == 0:
            out.append(c)
        elif t >= 2:
            out.append(CHARS[t - 2])
    return "".join(out)


model = EditTagger().cuda()
train_fwd = torch.compile(model)  # default inductor for training
tag = torch.compile(lambda ids: model(ids).argmax(-1), mode="reduce-overhead")


def train(pairs_loader, steps=2000):
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
    model.train()
    for step, (ids, gold) in enumerate(pairs_loader):
        logits = train_fwd(ids)  # CLEAN: default torch.compile, no CUDA graphs
        loss = F.cross_entropy(logits.flatten(0, 1), gold.flatten(), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step == steps:
            break


@torch.no_grad()
def correct_page(lines):
    model.eval()
    fixed = []
    for line in lines:
        tags = tag(encode([line]))  # HAZARD: dynamic-shape
        fixed.append(apply_tags(line, tags[0].tolist()))
    return fixed


@torch.no_grad()
def correct_page_batched(lines, bs=64):
    model.eval()
    fixed = []
    for i in range(0, len(lines), bs):
        tags = tag(encode(pad_page(lines[i:i + bs], bs), MAX_LEN)).clone()  # CLEAN: fixed (64, 128) shape and cloned
        fixed += [apply_tags(l, t.tolist()) for l, t in zip(lines[i:i + bs], tags)]
    return fixed


def pad_page(page, bs=64):
    return page[:bs] + [""] * (bs - len(page[:bs]))


@torch.no_grad()
def archive_tags(pages):
    model.eval()
    store = []
    for page in pages:
        store.append(tag(encode(pad_page(page), MAX_LEN)))  # HAZARD: static-address
    return store
