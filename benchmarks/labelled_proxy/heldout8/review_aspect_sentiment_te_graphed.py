"""Aspect-based sentiment for marketplace product reviews.

Reviews are scored for six aspects (quality, price, shipping, fit, service,
packaging) with three polarities each.  The encoder is a stack of Transformer
Engine layers in FP8, graphed with te.make_graphed_callables; embedding and
heads stay eager.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

VOCAB, H, HEADS, SEQ, N_LAYERS = 50000, 768, 12, 256, 8
ASPECTS = ["quality", "price", "shipping", "fit", "service", "packaging"]


class ReviewBlock(nn.Module):
    def __init__(self, gen):
        super().__init__()
        self.layer = te.TransformerLayer(H, 4 * H, HEADS, hidden_dropout=0.1, attention_dropout=0.1,
                                         self_attn_mask_type="no_mask", params_dtype=torch.bfloat16)
        self.gen = gen
        self.res_scale = 0.0

    def forward(self, x):
        keep = torch.rand(x.shape[0], x.shape[1], 1, device=x.device, generator=self.gen) > 0.05  # HAZARD: rng
        y = self.layer(x * keep)
        scale = self.res_scale  # HAZARD: python-scalar
        return x + scale * (y - x)


class AspectHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.Linear(H, len(ASPECTS) * 3)

    def forward(self, pooled):
        pooled = F.dropout(pooled, 0.1, self.training)
        return self.heads(pooled).view(-1, len(ASPECTS), 3)


def token_guard(module, args):
    (x,) = args
    return (x.clamp(-50, 50),)


class SentimentModel:
    def __init__(self, batch=32, seed=11):
        self.recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
        self.emb = nn.Embedding(VOCAB, H).cuda().to(torch.bfloat16)
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(seed)
        blocks = [ReviewBlock(self.gen).cuda() for _ in range(N_LAYERS)]
        for blk in blocks:
            blk.register_forward_pre_hook(token_guard)  # HAZARD: api-misuse
        sample = torch.randn(SEQ, batch, H, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            self.blocks = te.make_graphed_callables(
                tuple(blocks), tuple((sample,) for _ in blocks),
                enabled=True, recipe=self.recipe, cache_quantized_params=False)
        self.raw_blocks = blocks
        self.heads = AspectHeads().cuda()
        params = [p for b in blocks for p in b.parameters()] + list(self.heads.parameters()) + list(self.emb.parameters())
        self.opt = torch.optim.AdamW(params, lr=1e-4)

    def forward(self, ids):
        x = self.emb(ids).transpose(0, 1).contiguous()
        with te.autocast(enabled=True, recipe=self.recipe):  # CLEAN: TE autocast around replays, no torch cast cache
            for blk in self.blocks:
                x = blk(x)  # CLEAN: graphed callable called positionally
        return self.heads(x.float().mean(0))

    def train_step(self, step, ids, labels):
        for blk in self.raw_blocks:
            blk.res_scale = min(1.0, step / 2000)
        logits = self.forward(ids)
        loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-1)
        loss.backward()
        self.opt.step()  # CLEAN: eager optimizer step, outside the graphed layers
        self.opt.zero_grad(set_to_none=True)
        return loss.detach()


if __name__ == "__main__":
    model = SentimentModel()
    for step in range(10_000):
        ids = torch.randint(0, VOCAB, (32, SEQ), device="cuda")
        labels = torch.randint(-1, 3, (32, len(ASPECTS)), device="cuda")
        model.train_step(step, ids, labels)
