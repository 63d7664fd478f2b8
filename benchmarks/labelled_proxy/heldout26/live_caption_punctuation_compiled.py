"""Punctuation and true-casing for live captions (asyncio caption relay).

Partial ASR hypotheses stream in over a websocket; every partial is re-punctuated over a
sliding token window and pushed to the caption renderer. The tagger is compiled with
mode="reduce-overhead". A nightly job re-punctuates archived transcripts in batches with a
default torch.compile of the same model.
"""
import asyncio

import torch
import torch.nn as nn
import torch.nn.functional as F

PUNCT = ["", ",", ".", "?"]
CASE = ["lower", "upper", "title"]
WINDOW = 64


class Block(nn.Module):
    def __init__(self, d, heads=6):
        super().__init__()
        self.h, self.n1, self.n2 = heads, nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.h, d // self.h).transpose(1, 3).unbind(2)
        a = F.scaled_dot_product_attention(q, k, v)
        x = x + self.out(a.transpose(1, 2).reshape(b, t, d))
        return x + self.ff(self.n2(x))


class PunctTagger(nn.Module):
    def __init__(self, vocab=32000, d=384):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.enc = nn.Sequential(*[Block(d) for _ in range(4)])
        self.punct = nn.Linear(d, len(PUNCT))
        self.case = nn.Linear(d, len(CASE))

    def forward(self, ids):
        h = self.enc(self.emb(ids))
        return self.punct(h), self.case(h)


def decode_labels(p_logits, c_logits):
    p = p_logits.argmax(-1)[0].tolist()  # HAZARD: host-sync
    c = c_logits.argmax(-1)[0]
    return p, c


class CaptionRelay:
    def __init__(self, model, tokenizer, dev="cuda"):
        self.dev, self.tok = dev, tokenizer
        self.model = model.to(dev).eval()
        self.tagger = torch.compile(self.model, mode="reduce-overhead")
        self.pending = []
        self.window = torch.zeros(1, WINDOW, dtype=torch.long, device=dev)

    @torch.no_grad()
    def _tag(self, ids):
        p_logits, c_logits = self.tagger(ids)
        print("tagged", ids.shape[1], "tokens")  # CLEAN: print in the eager caller, outside the compiled forward
        return p_logits, c_logits

    @torch.no_grad()
    def on_partial(self, text):
        ids = torch.tensor([self.tok.encode(text)[-WINDOW:]], device=self.dev)
        p_logits, c_logits = self.tagger(ids)  # HAZARD: dynamic-shape
        self.pending.append(p_logits)  # HAZARD: static-address
        return ids, p_logits.argmax(-1)

    @torch.no_grad()
    def on_partial_padded(self, text):
        toks = self.tok.encode(text)[-WINDOW:]
        self.window.zero_()
        self.window[0, WINDOW - len(toks):] = torch.tensor(toks, device=self.dev)  # CLEAN: eager upload before the compiled call
        p_logits, c_logits = self._tag(self.window)  # CLEAN: fixed WINDOW-length input
        return p_logits.clone(), c_logits.clone()  # CLEAN: cloned before the next partial overwrites them

    def render(self, text, p_logits, c_logits):
        words = text.split()[-WINDOW:]
        p = p_logits.argmax(-1)[0, -len(words):].tolist()  # CLEAN: host read-back after the compiled call
        return " ".join(w + PUNCT[k] for w, k in zip(words, p))

    def period_confidence(self):
        with torch.no_grad():
            return punct_probs(self.model, self.window)


@torch.compile(mode="reduce-overhead")
def punct_probs(model, ids):
    p_logits, _ = model(ids)
    probs = p_logits.softmax(-1)
    print("max period prob", probs[..., 2].amax())  # HAZARD: host-code
    return decode_labels(p_logits, p_logits)[1]


def archive_job(model, batches):
    batch_tagger = torch.compile(model)
    return [batch_tagger(ids.cuda())[0] for ids in batches]  # CLEAN: default compile, no CUDA graphs: ragged batches are fine


async def relay(ws_in, ws_out, model, tokenizer):
    r = CaptionRelay(model, tokenizer)
    async for msg in ws_in:
        p, c = r.on_partial_padded(msg["text"])
        await ws_out.send(r.render(msg["text"], p, c))
        await asyncio.sleep(0)
