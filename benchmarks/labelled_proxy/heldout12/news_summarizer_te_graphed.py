"""Extractive summaries for a news-reader app (BERTSum-style, sentence level).

Sentence vectors come from a frozen multilingual encoder; a 4-layer
inter-sentence transformer on Transformer Engine scores which sentences go
into the 3-bullet summary. The embedding, the TE layers and the scorer are
graphed with TE's make_graphed_callables (FP8, delayed scaling).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

HID, FFN, HEADS, LAYERS, SENTS, BATCH = 768, 3072, 12, 4, 64, 16


class SentEmbed(nn.Module):
    def __init__(self, seed=9):
        super().__init__()
        self.pos = nn.Parameter(torch.zeros(1, SENTS, HID))
        self.norm = te.LayerNorm(HID)
        self.drop_gen = torch.Generator(device="cuda")
        self.drop_gen.manual_seed(seed)

    def forward(self, sent_vecs):
        keep = torch.rand(sent_vecs.shape[:2], device=sent_vecs.device, generator=self.drop_gen) > 0.1  # HAZARD: rng
        return self.norm(sent_vecs * keep[..., None] + self.pos)


class InterSentenceBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = te.TransformerLayer(HID, FFN, HEADS, hidden_dropout=0.0, attention_dropout=0.0,
                                         self_attn_mask_type="padding", attn_input_format="bshd")

    def forward(self, x, attention_mask):
        return self.layer(x, attention_mask=attention_mask)


class SentScorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = te.Linear(HID, 16)
        self.out = nn.Linear(16, 1)

    def forward(self, x, valid):
        logits = self.out(F.gelu(self.fc(x))).squeeze(-1)
        real = logits[valid > 0]  # HAZARD: dynamic-shape
        return logits - real.mean()


def check_layout(module, args):
    assert args[0].dim() == 3


def build(recipe):
    embed, scorer = SentEmbed().cuda(), SentScorer().cuda()
    blocks = [InterSentenceBlock().cuda() for _ in range(LAYERS)]
    for blk in blocks:
        blk.register_forward_pre_hook(check_layout)  # HAZARD: api-misuse
    sent = torch.randn(BATCH, SENTS, HID, device="cuda")
    x = torch.randn(BATCH, SENTS, HID, device="cuda", requires_grad=True)
    valid = torch.ones(BATCH, SENTS, device="cuda")
    pad = torch.zeros(BATCH, 1, 1, SENTS, dtype=torch.bool, device="cuda")
    sample_args = ((sent,),) + tuple((x,) for _ in blocks) + ((x, valid),)
    sample_kwargs = ({},) + tuple({"attention_mask": pad} for _ in blocks) + ({},)
    with torch.amp.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        graphed = te.make_graphed_callables((embed, *blocks, scorer), sample_args, sample_kwargs=sample_kwargs,
                                            enabled=True, recipe=recipe, cache_quantized_params=False)
    scorer.register_forward_hook(lambda m, a, out: None)  # CLEAN: hook registered after graphing
    return (embed, blocks, scorer), graphed


def train(loader, steps=5000):
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
    (embed, blocks, scorer), graphed = build(recipe)
    g_embed, g_blocks, g_scorer = graphed[0], graphed[1:-1], graphed[-1]
    params = [p for m in (embed, *blocks, scorer) for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=2e-5, weight_decay=0.01)
    for step, (sent_vecs, valid, oracle) in zip(range(steps), loader):
        pad_mask = (valid == 0)[:, None, None, :]
        with te.autocast(enabled=True, recipe=recipe):  # CLEAN: replayed under te.autocast with the graphing recipe
            x = g_embed(sent_vecs)
            for g in g_blocks:
                x = g(x, attention_mask=pad_mask)  # CLEAN: keyword declared in sample_kwargs
            logits = g_scorer(x, valid)
        loss = (F.binary_cross_entropy_with_logits(logits, oracle, reduction="none") * valid).sum() / valid.sum()
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()
    return embed, blocks, scorer


if __name__ == "__main__":
    def batches():
        while True:
            valid = (torch.arange(SENTS, device="cuda") < torch.randint(8, SENTS, (BATCH, 1), device="cuda")).float()
            yield torch.randn(BATCH, SENTS, HID, device="cuda"), valid, (torch.rand(BATCH, SENTS, device="cuda") < 0.1).float()
    train(batches())
