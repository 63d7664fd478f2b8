"""Conjugation drills of a language-learning app: character-level morphological inflection.

lemma + feature tags (e.g. V;IND;PST;3;SG) -> inflected form, greedy decoding with a
copy bias towards lemma characters. Encoder and decoder step are closures compiled with
options={"triton.cudagraphs": True}.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

CG = {"triton.cudagraphs": True}
PAD, BOS, EOS = 0, 1, 2


class Inflector(nn.Module):
    def __init__(self, n_chars=128, n_tags=64, d=256):
        super().__init__()
        self.chars = nn.Embedding(n_chars, d, padding_idx=PAD)
        self.tags = nn.EmbeddingBag(n_tags, d, mode="sum", padding_idx=0)
        self.enc = nn.GRU(d, d // 2, bidirectional=True, batch_first=True)
        self.dec = nn.GRUCell(2 * d, d)
        self.attn = nn.Linear(d, d, bias=False)
        self.out = nn.Linear(2 * d, n_chars)
        self.copy_bias = 0.5            # tuned per language
        self.last_tags = []


def make_decoder(model, tag_vocab):
    @torch.compile(options=CG)
    def encode(lemma, tag_ids):
        mem, _ = model.enc(model.chars(lemma))
        tags_seen = tag_ids[0].tolist()  # HAZARD: host-sync
        model.last_tags = [tag_vocab[i] for i in tags_seen if i]
        return mem, model.tags(tag_ids)

    @torch.compile(options=CG)
    def step(prev, h, mem, t, lemma):
        h = model.dec(torch.cat([model.chars(prev), t], -1), h)
        a = (mem @ model.attn(h)[:, :, None]).squeeze(-1)
        a = a.masked_fill(lemma.eq(PAD), -1e4).softmax(-1)  # CLEAN: masked_fill keeps the shape
        logits = model.out(torch.cat([h, (a[..., None] * mem).sum(1)], -1))
        copy = (F.one_hot(lemma, logits.shape[-1]).float() * a[..., None]).sum(1)
        logits = logits + model.copy_bias * copy  # HAZARD: python-scalar
        if (logits.amax(-1) < 0).all():  # HAZARD: dynamic-control-flow
            logits = logits + copy      # nothing confident: fall back to copying the lemma
        return logits.argmax(-1), h

    return encode, step


@torch.no_grad()
def inflect(model, encode, step, lemma, tag_ids, max_len=24):
    mem, t = encode(lemma, tag_ids)
    mem, t = mem.clone(), t.clone()  # CLEAN: cloned before step() runs
    prev = torch.full((lemma.shape[0],), BOS, dtype=torch.long, device=lemma.device)
    h = torch.zeros(lemma.shape[0], model.dec.hidden_size, device=lemma.device)
    out = []
    for _ in range(max_len):
        prev, h = step(prev, h, mem, t, lemma)  # HAZARD: static-address
        out.append(prev.clone())
    return torch.stack(out, 1)


@torch.no_grad()
def inflect_for_drill(model, encode, step, lemma, tag_ids, max_len=24):
    mem, t = (x.clone() for x in encode(lemma, tag_ids))
    prev = torch.full((lemma.shape[0],), BOS, dtype=torch.long, device=lemma.device)
    h = torch.zeros(lemma.shape[0], model.dec.hidden_size, device=lemma.device)
    out = []
    for _ in range(max_len):
        nxt, h_new = step(prev, h, mem, t, lemma)
        prev, h = nxt.clone(), h_new.clone()  # CLEAN: outputs cloned before they are fed back
        out.append(prev)
    return torch.stack(out, 1)


def build_drills(model, tag_vocab, batches):
    encode, step = make_decoder(model, tag_vocab)
    for lang, bias in (("es", 0.5), ("fi", 1.5), ("tr", 1.0)):
        model.copy_bias = bias
        for lemma, tags in batches[lang]:        # 64 words, lemmas padded to 32 characters
            yield lang, inflect(model, encode, step, lemma.cuda(), tags.cuda()), model.last_tags
