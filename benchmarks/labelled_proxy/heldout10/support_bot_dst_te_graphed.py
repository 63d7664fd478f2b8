"""Dialogue-state tracking for a customer-support chatbot, on Transformer Engine.

The turn history (up to 256 tokens) is encoded by four TE TransformerLayers in
wrapper blocks; a slot-gate head decides for every slot whether its value is
none / dontcare / a span. The blocks are graphed with TE make_graphed_callables
(FP8) for training; the padding mask is declared in sample_kwargs.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling

S, B, D, H, LAYERS, N_SLOTS = 256, 16, 512, 8, 4, 30
RECIPE = DelayedScaling(amax_history_len=32)


class DSTBlock(nn.Module):
    def __init__(self, idx, domain_prior_np):
        super().__init__()
        self.layer = te.TransformerLayer(D, 4 * D, H, self_attn_mask_type="padding", params_dtype=torch.bfloat16)
        self.idx = idx
        self.domain_prior_np = domain_prior_np  # (D,) bias for the deployment's domain (airline, telco, ...)
        self.token_norm = None

    def forward(self, x, attention_mask):
        if self.idx == 0:
            prior = torch.as_tensor(self.domain_prior_np, device="cuda", dtype=x.dtype)  # HAZARD: pinned-memory
            x = x + prior
        y = self.layer(x, attention_mask=attention_mask)
        if self.idx == LAYERS - 1:
            pad = attention_mask.view(B, S).transpose(0, 1)  # (S, B), True = padding
            self.token_norm = y[~pad].float().norm(dim=-1).mean()  # HAZARD: dynamic-shape
            y = y.masked_fill(pad.unsqueeze(-1), 0.0)  # CLEAN: masked_fill keeps the shape
        return y


def count_tokens(module, args, kwargs):
    module.tokens_seen = getattr(module, "tokens_seen", 0) + args[0].shape[0] * args[0].shape[1]


def build(domain_prior_np, device="cuda"):
    blocks = [DSTBlock(i, domain_prior_np).to(device) for i in range(LAYERS)]
    for blk in blocks:
        blk.register_forward_pre_hook(count_tokens, with_kwargs=True)  # HAZARD: api-misuse
    xs = [torch.randn(S, B, D, device=device, dtype=torch.bfloat16, requires_grad=True) for _ in blocks]
    mask = torch.zeros(B, 1, 1, S, dtype=torch.bool, device=device)
    with torch.amp.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        graphed = te.make_graphed_callables(
            tuple(blocks), tuple((x,) for x in xs),
            sample_kwargs=tuple({"attention_mask": mask} for _ in blocks),
            enabled=True, recipe=RECIPE, cache_quantized_params=False,
        )
    return blocks, graphed


class SlotGate(nn.Module):
    def __init__(self):
        super().__init__()
        self.slot_q = nn.Parameter(torch.randn(N_SLOTS, D) * 0.02)
        self.gate = nn.Linear(D, 3)

    def forward(self, h):  # h: (S, B, D)
        att = torch.softmax(torch.einsum("sbd,nd->bns", h.float(), self.slot_q), -1)
        ctx = torch.einsum("bns,sbd->bnd", att, h.float())
        return self.gate(ctx)


def train(loader, domain_prior_np, steps=10_000, device="cuda"):
    emb = nn.Embedding(32000, D).to(device, torch.bfloat16)
    blocks, graphed = build(domain_prior_np, device)
    gate = SlotGate().to(device)
    opt = torch.optim.AdamW([*emb.parameters(), *gate.parameters(), *(p for b in blocks for p in b.parameters())], lr=1e-4)
    for step, (ids, pad, gate_y) in zip(range(steps), loader):
        x = emb(ids).transpose(0, 1).contiguous()
        with te.autocast(enabled=True, recipe=RECIPE):  # CLEAN: replays inside te.autocast with the capture recipe
            for blk in graphed:
                x = blk(x, attention_mask=pad)  # CLEAN: keyword declared in sample_kwargs, accepted by TE graphed callables
        loss = F.cross_entropy(gate(x).flatten(0, 1), gate_y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


if __name__ == "__main__":
    dialogues = torch.load("support_dialogues_multiwoz_style.pt")
    loader = torch.utils.data.DataLoader(dialogues, batch_size=B, shuffle=True, drop_last=True)
    train(loader, np.load("domain_prior_telco.npy"))
