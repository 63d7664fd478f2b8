"""Keyphrase extraction (BIO tagging) over crawled landing pages for an SEO audit tool.

Six te.TransformerLayer blocks are graphed with te.make_graphed_callables and
cache_quantized_params=True (FP8 weights cached across micro-batches); the page
embedding and the tagging head are graphed by a second call without FP8.
"""
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling

TAGS = ("O", "B-KP", "I-KP")
SEQ, MB, HID, HEADS, VOCAB = 256, 8, 512, 8, 32000


class PageEmbedding(nn.Module):
    def __init__(self, stopword_mask, crawl_epoch):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, HID)
        self.pos = nn.Parameter(torch.zeros(SEQ, 1, HID))
        self.stop = nn.Parameter(torch.zeros(HID))
        self.stopword_np = stopword_mask               # np.bool_ [VOCAB]
        self.crawl_epoch = crawl_epoch                 # unix time of the crawl snapshot

    def forward(self, ids):                            # ids [S, B]
        is_stop = torch.from_numpy(self.stopword_np).to(ids.device)[ids]  # HAZARD: pinned-memory
        age_days = (time.time() - self.crawl_epoch) / 86400.0  # HAZARD: host-code
        freshness = 0.5 + 0.5 * math.exp(-age_days / 365.0)
        return (self.tok(ids) + self.pos + is_stop[..., None].float() * self.stop) * freshness


class BioHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(HID, 128)
        self.out = nn.Linear(128, len(TAGS))
        self.register_buffer("kp_conf", torch.zeros(()))

    def forward(self, x, pad):                         # x [S, B, H], pad [B, S] (True = padding)
        logits = self.out(torch.relu(self.proj(x)))
        logits = logits.masked_fill(pad.T[..., None], 0.0)  # CLEAN: masked_fill keeps the shape
        kp = logits[logits.argmax(-1) > 0]  # HAZARD: dynamic-shape
        self.kp_conf.copy_(kp.softmax(-1).amax(-1).mean())
        return logits


def build(stopwords, crawl_epoch, n_layers=6):
    embed, head = PageEmbedding(stopwords, crawl_epoch).cuda(), BioHead().cuda()
    layers = tuple(te.TransformerLayer(HID, 4 * HID, HEADS, hidden_dropout=0.0, attention_dropout=0.0,
                                       self_attn_mask_type="padding").cuda() for _ in range(n_layers))
    recipe = DelayedScaling()
    ids = torch.randint(0, VOCAB, (SEQ, MB), device="cuda")
    x = torch.randn(SEQ, MB, HID, device="cuda", requires_grad=True)
    attn_mask = torch.zeros(MB, 1, 1, SEQ, dtype=torch.bool, device="cuda")
    pad = torch.zeros(MB, SEQ, dtype=torch.bool, device="cuda")
    g_embed, g_head = te.make_graphed_callables((embed, head), ((ids,), (x, pad)), enabled=False)
    g_layers = te.make_graphed_callables(layers, tuple((x,) for _ in layers),
                                         sample_kwargs=tuple({"attention_mask": attn_mask} for _ in layers),
                                         enabled=True, recipe=recipe, cache_quantized_params=True)
    return g_embed, g_layers, g_head, recipe


def train_step(g_embed, g_layers, g_head, recipe, micro_batches, opt):
    for mb, (ids, attn_mask, pad, tags) in enumerate(micro_batches):
        with te.autocast(enabled=True, recipe=recipe):  # CLEAN: replay under te.autocast with the capture recipe
            x = g_embed(ids)
            for blk in g_layers:
                x = blk(x, attention_mask=attn_mask, is_first_microbatch=(mb == 0))  # CLEAN: flag passed on every replay
            logits = g_head(x, pad)
        loss = F.cross_entropy(logits.float().flatten(0, 1), tags.T.flatten(), ignore_index=-100)
        (loss / len(micro_batches)).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def rescore_crawl(g_embed, g_layers, g_head, recipe, pages):
    # nightly re-scoring of the whole crawl with the training graphs
    out = []
    for ids, attn_mask, pad in pages:
        with te.autocast(enabled=True, recipe=recipe):
            x = g_embed(ids)
            for blk in g_layers:
                x = blk(x, attention_mask=attn_mask)  # HAZARD: api-misuse
            out.append(g_head(x, pad).argmax(-1).T.clone())
    return out
