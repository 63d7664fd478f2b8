"""IDE code-completion server: small causal LM, decode step compiled with max-autotune, penalty injected."""
import functools
import time
import torch
import torch.nn as nn
import torch.nn.functional as F

def timed(fn):
    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        t0 = time.perf_counter()  # HAZARD: host-code
        out = fn(self, *args, **kwargs)
        self.last_step_s = time.perf_counter() - t0
        return out
    return wrapper

def fp32_logits(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs).float()  # CLEAN: decorator only casts the dtype
    return wrapper

class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h, self.qkv, self.o = h, nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(self.n1(x)).view(B, T, 3, self.h, D // self.h).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(B, T, D))
        return x + self.mlp(self.n2(x))

class CodeLM(nn.Module):
    def __init__(self, vocab=32000, d=512, layers=6):
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Embedding(1024, d)
        self.blocks = nn.ModuleList(Block(d, 8) for _ in range(layers))
        self.head = nn.Linear(d, vocab, bias=False)
    @fp32_logits
    def forward(self, ids):
        x = self.emb(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for b in self.blocks:
            x = b(x)
        return self.head(x[:, -1])

class ListPenalty:
    def __call__(self, logits, window):
        seen = window[0, -16:].tolist()  # HAZARD: host-sync
        logits[:, seen] -= 1.5
        return logits

class ScatterPenalty:
    def __call__(self, logits, window):
        pen = torch.zeros_like(logits).scatter_(1, window[:, -16:], 1.5)  # CLEAN: device-side scatter
        return logits - pen

class Completer:
    WINDOW = 256
    def __init__(self, model, penalty):
        self.model, self.penalty = model.cuda().eval(), penalty
        self.step = torch.compile(self._step, mode="max-autotune")
    @timed
    def _step(self, window):
        logits = self.penalty(self.model(window), window)
        return self._pick(logits)
    @staticmethod
    def _pick(logits):
        return logits.argmax(-1, keepdim=True)  # CLEAN: greedy pick stays on device
    def _left_pad(self, prompt):
        p = prompt[:, -self.WINDOW:]
        pad = p.new_zeros(p.shape[0], self.WINDOW)
        pad[:, -p.shape[1]:] = p
        return pad
    @torch.no_grad()
    def complete(self, prompt, n_new=32):
        window, out = self._left_pad(prompt), []
        for _ in range(n_new):
            nxt = self.step(window)
            out.append(nxt)  # HAZARD: static-address
            window = torch.cat([window[:, 1:], nxt], 1)  # CLEAN: cat copies the token into a fresh window
        return torch.cat(out, 1)
    @torch.no_grad()
    def rank_snippets(self, snippets):
        return [self.step(s).clone() for s in snippets]  # HAZARD: dynamic-shape

def serve(requests, tokenizer):
    completer = Completer(CodeLM(), ListPenalty())
    replies = []
    for prompt in requests:
        ids = completer.complete(prompt.cuda())
        replies.append(tokenizer.decode(ids[0].tolist()))  # CLEAN: host read after decoding ends
    return replies
