"""Resume parsing for a job board: BIO tagging of names, contacts, employers,
titles, skills, dates and degrees.

Tokens carry the id of the resume section they were found in (header,
experience, education, skills, ...). The tagger runs on Transformer Engine
layers in FP8; embedding, layers and head are graphed with TE's
make_graphed_callables and quantized weights are cached across the
gradient-accumulation micro-batches.
"""
import collections

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

VOCAB, N_SECTIONS, N_TAGS = 32000, 8, 16
HID, FFN, HEADS, LAYERS, SEQ, MB, ACCUM = 512, 2048, 8, 6, 256, 16, 4

class TokenEmbed(nn.Module):
    def __init__(self, section_prior):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, HID)
        self.sec = nn.Embedding(N_SECTIONS, HID)
        self.section_prior_np = section_prior.astype(np.float32)

    def forward(self, ids, sec_ids):
        prior = torch.as_tensor(self.section_prior_np, device=ids.device)  # HAZARD: pinned-memory
        return self.tok(ids) + self.sec(sec_ids) * prior[sec_ids][..., None]

class TaggerBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = te.TransformerLayer(HID, FFN, HEADS, hidden_dropout=0.0, attention_dropout=0.0,
                                         self_attn_mask_type="padding", attn_input_format="bshd")

    def forward(self, x, attention_mask):
        y = self.layer(x, attention_mask=attention_mask)
        if torch.isinf(y).any():  # HAZARD: dynamic-control-flow
            y = torch.nan_to_num(y, posinf=6e4, neginf=-6e4)
        return y

class BIOHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = te.Linear(HID, N_TAGS)
        self.tag_counts = collections.Counter()

    def forward(self, x):
        logits = torch.nan_to_num(self.fc(x), nan=0.0)  # CLEAN: unconditional, no branch on the tensor
        self.tag_counts.update(logits.argmax(-1).flatten().tolist())  # HAZARD: host-sync
        return logits

def build(recipe, section_prior):
    embed, head = TokenEmbed(section_prior).cuda(), BIOHead().cuda()
    blocks = [TaggerBlock().cuda() for _ in range(LAYERS)]
    ids = torch.randint(0, VOCAB, (MB, SEQ), device="cuda")
    sec = torch.randint(0, N_SECTIONS, (MB, SEQ), device="cuda")
    x = torch.randn(MB, SEQ, HID, device="cuda", requires_grad=True)
    pad = torch.zeros(MB, 1, 1, SEQ, dtype=torch.bool, device="cuda")
    graphed = te.make_graphed_callables(
        (embed, *blocks, head),
        ((ids, sec),) + tuple((x,) for _ in blocks) + ((x,),),
        sample_kwargs=({},) + tuple({"attention_mask": pad} for _ in blocks) + ({},),
        enabled=True, recipe=recipe, cache_quantized_params=True)
    return (embed, blocks, head), graphed

def run(graphed, ids, sec, pad, first_mb=None):
    g_embed, g_blocks, g_head = graphed[0], graphed[1:-1], graphed[-1]
    x = g_embed(ids, sec)
    for g in g_blocks:
        if first_mb is None:
            x = g(x, attention_mask=pad)  # HAZARD: api-misuse
        else:
            x = g(x, attention_mask=pad, is_first_microbatch=first_mb)  # CLEAN: weight-cache flag passed on replay
    return g_head(x)

def train(loader, dev_batch, section_prior, steps=2000):
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=32, amax_compute_algo="max")
    modules, graphed = build(recipe, section_prior)
    params = [p for m in (modules[0], *modules[1], modules[2]) for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=3e-4)
    for step in range(steps):
        for mb in range(ACCUM):
            ids, sec, tags, pad = next(loader)
            with te.autocast(enabled=True, recipe=recipe):  # CLEAN: replay under te.autocast
                logits = run(graphed, ids, sec, pad, first_mb=(mb == 0))
            loss = F.cross_entropy(logits.flatten(0, 1), tags.flatten(), ignore_index=-100) / ACCUM
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        if step % 500 == 0:
            with torch.no_grad(), te.autocast(enabled=True, recipe=recipe):
                dev_logits = run(graphed, *dev_batch)
    return modules

if __name__ == "__main__":
    def stream():
        while True:
            yield (torch.randint(0, VOCAB, (MB, SEQ), device="cuda"), torch.randint(0, N_SECTIONS, (MB, SEQ), device="cuda"),
                   torch.randint(0, N_TAGS, (MB, SEQ), device="cuda"), torch.zeros(MB, 1, 1, SEQ, dtype=torch.bool, device="cuda"))
    it = stream()
    dev = next(it)
    train(it, (dev[0], dev[1], dev[3]), np.linspace(0.5, 1.5, N_SECTIONS))
