"""Extractive answers for a help-centre search box (SQuAD-style span prediction).

Question + article passage are packed into 384 tokens; segment ids mark the
passage. Embedding, 8 Transformer Engine layers with a padding mask and the
span head are graphed together with TE make_graphed_callables.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

log = logging.getLogger("helpcenter.qa")
SEQ, HID, HEADS, LAYERS, VOCAB = 384, 768, 12, 8, 30522
recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=32, amax_compute_algo="max")


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, HID)
        self.seg = nn.Embedding(2, HID)
        self.pos = nn.Parameter(torch.zeros(SEQ, HID))

    def forward(self, ids, seg_ids, attn):
        n = int(attn.sum(1).max())  # HAZARD: host-sync
        ids, seg_ids = ids[:, :n], seg_ids[:, :n]          # trim to the longest packed example
        x = self.tok(ids) + self.seg(seg_ids) + self.pos[:n]
        return F.pad(x, (0, 0, 0, SEQ - n)).transpose(0, 1).contiguous()


class SpanHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.qa = nn.Linear(HID, 2)
        self.n_forward = 0

    def forward(self, h, seg_ids):
        self.n_forward += 1  # HAZARD: host-code
        start, end = self.qa(h.transpose(0, 1)).unbind(-1)
        start = start.masked_fill(seg_ids == 0, -1e4)  # CLEAN: masked_fill keeps the shape
        end = end.masked_fill(seg_ids == 0, -1e4)
        passage_start = start[seg_ids == 1]  # HAZARD: dynamic-shape
        no_answer = start[:, 0] - torch.logsumexp(passage_start, 0)
        return start, end, no_answer


def shape_check(module, args):
    log.debug("layer input %s", tuple(args[0].shape))


def build(batch: int = 24):
    embed, head = Embed().cuda(), SpanHead().cuda()
    layers = [te.TransformerLayer(HID, 4 * HID, HEADS, hidden_dropout=0.0, attention_dropout=0.0,
                                  self_attn_mask_type="padding").cuda() for _ in range(LAYERS)]
    for layer in layers:
        layer.register_forward_pre_hook(shape_check)  # HAZARD: api-misuse
    ids = torch.randint(0, VOCAB, (batch, SEQ), device="cuda")
    seg = torch.randint(0, 2, (batch, SEQ), device="cuda")
    attn = torch.ones(batch, SEQ, dtype=torch.long, device="cuda")
    h = torch.randn(SEQ, batch, HID, device="cuda", requires_grad=True)
    pad_mask = torch.zeros(batch, 1, 1, SEQ, dtype=torch.bool, device="cuda")
    modules = (embed, *layers, head)
    sample_args = ((ids, seg, attn),) + tuple((h,) for _ in layers) + ((h, seg),)
    sample_kwargs = ({},) + tuple({"attention_mask": pad_mask} for _ in layers) + ({},)
    graphed = te.make_graphed_callables(modules, sample_args, sample_kwargs=sample_kwargs,
                                        enabled=True, recipe=recipe, cache_quantized_params=False)
    return modules, graphed


def train(loader, epochs: int = 2):
    modules, graphed = build()
    g_embed, g_layers, g_head = graphed[0], graphed[1:-1], graphed[-1]
    opt = torch.optim.AdamW([p for m in modules for p in m.parameters()], lr=5e-5)
    for epoch in range(epochs):
        for ids, seg, attn, start_pos, end_pos in loader:
            pad_mask = (attn == 0)[:, None, None, :]
            with te.autocast(enabled=True, recipe=recipe):  # CLEAN: TE autocast at replay, no torch cast cache
                h = g_embed(ids, seg, attn)
                for layer in g_layers:
                    h = layer(h, attention_mask=pad_mask)  # CLEAN: keyword declared in sample_kwargs
                start, end, no_answer = g_head(h, seg)
            loss = F.cross_entropy(start.float(), start_pos) + F.cross_entropy(end.float(), end_pos)
            opt.zero_grad(set_to_none=False)
            loss.backward()
            opt.step()
        log.info("epoch %d done, head called %d times", epoch, modules[-1].n_forward)
    return modules, graphed
