"""Contrastive decoding (expert minus amateur) for a code-review comment generator.

The expert (7B) and amateur (350M) models each keep a static KV cache and are
compiled with reduce-overhead.  `enable_fast_path()` swaps the module-level
`contrast_step` for its compiled version when the server starts on a GPU.
"""
import math

import torch
import torch.nn.functional as F

CFG = {"alpha": 0.1, "beta": 0.5}


def contrast_step(logits_e, logits_a):
    lp_e = F.log_softmax(logits_e.float(), dim=-1)
    lp_a = F.log_softmax(logits_a.float(), dim=-1)
    cutoff = lp_e.max(dim=-1, keepdim=True).values + math.log(0.1)
    plausible = lp_e >= cutoff
    beta = CFG["beta"]  # HAZARD: python-scalar
    score = (1 + beta) * lp_e - beta * lp_a
    score = torch.where(plausible, score, torch.full_like(score, float("-inf")))  # CLEAN: device mask, fixed shape
    return score.argmax(dim=-1)


def plausible_set_size(logits_e):
    lp_e = F.log_softmax(logits_e.float(), dim=-1)
    cutoff = lp_e.max(dim=-1, keepdim=True).values + math.log(CFG["alpha"])
    return lp_e[lp_e >= cutoff].numel()  # HAZARD: dynamic-shape


def enable_fast_path():
    global contrast_step, plausible_set_size
    contrast_step = torch.compile(contrast_step, mode="reduce-overhead")
    plausible_set_size = torch.compile(plausible_set_size, mode="reduce-overhead")


class ContrastiveGenerator:
    def __init__(self, expert, amateur, max_len=2048):
        enable_fast_path()
        self.expert_eager, self.amateur_eager = expert.cuda().eval(), amateur.cuda().eval()
        self.expert = torch.compile(expert.cuda().eval(), mode="reduce-overhead")
        self.amateur = torch.compile(amateur.cuda().eval(), mode="reduce-overhead")
        self.pos = torch.zeros(1, dtype=torch.long, device="cuda")
        self.max_len = max_len

    @torch.no_grad()
    def _next(self, tok):
        le = self.expert(tok, self.pos).clone()  # CLEAN: cloned before the amateur runs
        la = self.amateur(tok, self.pos).clone()
        nxt = contrast_step(le, la)
        self.pos += 1
        return nxt.clone()

    @torch.no_grad()
    def _next_fast(self, tok):
        le = self.expert(tok, self.pos)
        la = self.amateur(tok, self.pos)
        nxt = contrast_step(le[:, -1], la[:, -1].clone())  # HAZARD: static-address
        self.pos += 1
        return nxt.clone()

    @torch.no_grad()
    def generate(self, prompt_ids, max_new=128, beta=0.5, fast=False):
        CFG["beta"] = beta
        self.pos.zero_()
        step = self._next_fast if fast else self._next
        ctx = prompt_ids.cuda()
        self.expert_eager(ctx[:, :-1], self.pos)  # CLEAN: prefill runs eagerly
        self.amateur_eager(ctx[:, :-1], self.pos)
        self.pos.fill_(ctx.shape[1] - 1)
        tok = ctx[:, -1:]
        out = []
        for _ in range(max_new):
            nxt = step(tok)
            out.append(nxt)
            tok = nxt[:, None]
        return torch.cat(out, dim=-1)

    @torch.no_grad()
    def rescore(self, full_ids):
        logits = self.expert(full_ids, torch.zeros_like(self.pos))  # HAZARD: dynamic-shape
        return plausible_set_size(logits[:, -1].clone())

    def debug_scores(self, tok):
        le = self.expert(tok, self.pos).clone()
        print("expert top", le.topk(5).indices.tolist())  # CLEAN: eager, outside the compiled code
        return le
