"""Smart-reply suggestions for a messaging app.

The last turns of a chat are encoded by Transformer Engine layers (FP8) and
matched against a bank of ~30k canned replies with in-batch negatives.  The
encoder layers are graphed with te.make_graphed_callables, including the
padding mask passed as a keyword.
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

VOCAB, H, HEADS, SEQ, LAYERS, N_REPLIES = 32_000, 512, 8, 96, 6, 30_000


class ContextBlock(nn.Module):
    def __init__(self, gen, skip_p=0.1, neft_alpha=5.0):
        super().__init__()
        self.layer = te.TransformerLayer(H, 4 * H, HEADS, hidden_dropout=0.1, attention_dropout=0.1,
                                         self_attn_mask_type="padding", params_dtype=torch.bfloat16)
        self.gen = gen
        self.skip_p = skip_p
        self.neft = neft_alpha / (SEQ * H) ** 0.5

    def forward(self, x, attention_mask):
        if self.training and random.random() < self.skip_p:  # HAZARD: host-code
            return x
        noise = torch.empty_like(x).uniform_(-1.0, 1.0, generator=self.gen)  # HAZARD: rng
        return self.layer(x + self.neft * noise, attention_mask=attention_mask)


def grad_monitor(module, grad_in, grad_out):
    module.last_grad_norm = grad_out[0].detach().norm()


class ReplyRanker(nn.Module):
    def __init__(self, batch=128, seed=5):
        super().__init__()
        self.recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=32, amax_compute_algo="max")
        self.emb = nn.Embedding(VOCAB, H).cuda().to(torch.bfloat16)
        self.replies = nn.Parameter(torch.randn(N_REPLIES, H, device="cuda") * 0.02)
        gen = torch.Generator(device="cuda")
        gen.manual_seed(seed)
        blocks = [ContextBlock(gen).cuda() for _ in range(LAYERS)]
        for b in blocks:
            b.register_full_backward_hook(grad_monitor)  # HAZARD: api-misuse
        x = torch.randn(SEQ, batch, H, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        mask = torch.zeros(batch, 1, 1, SEQ, dtype=torch.bool, device="cuda")
        with torch.amp.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            graphed = te.make_graphed_callables(
                tuple(blocks), tuple((x,) for _ in blocks),
                sample_kwargs=tuple({"attention_mask": mask} for _ in blocks),
                enabled=True, recipe=self.recipe)
        self.blocks = nn.ModuleList(graphed)

    def encode(self, ids, pad):
        x = self.emb(ids).transpose(0, 1).contiguous()
        mask = pad[:, None, None, :]
        with te.autocast(enabled=True, recipe=self.recipe):  # CLEAN: TE autocast around replays, no torch cast cache
            for blk in self.blocks:
                x = blk(x, attention_mask=mask)  # CLEAN: keyword was declared in sample_kwargs at graphing
        keep = (~pad).transpose(0, 1).unsqueeze(-1).to(x.dtype)
        return F.normalize(((x * keep).sum(0) / keep.sum(0).clamp(min=1)).float(), dim=-1)

    def loss(self, ids, pad, reply_idx, tau=0.05):
        ctx = self.encode(ids, pad)
        rep = F.normalize(self.replies[reply_idx], dim=-1)
        logits = ctx @ rep.T / tau
        return F.cross_entropy(logits, torch.arange(ids.shape[0], device="cuda"))


def train(steps=50_000, batch=128):
    model = ReplyRanker(batch)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=0.01)
    for step in range(steps):
        ids = torch.randint(0, VOCAB, (batch, SEQ), device="cuda")
        lens = torch.randint(8, SEQ, (batch,), device="cuda")
        pad = torch.arange(SEQ, device="cuda")[None, :] >= lens[:, None]
        loss = model.loss(ids, pad, torch.randint(0, N_REPLIES, (batch,), device="cuda"))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


if __name__ == "__main__":
    train()
