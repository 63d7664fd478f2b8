"""Contrastive fine-tuning of a GTE-style embedding model (in-batch negatives, MNRL).

Encoder layers are Transformer Engine layers wrapped with rotary tables and a
segment bias, graphed with TE's make_graphed_callables (FP8, TE >= 2.9 keyword
names, `cache_quantized_params=True`). Pooling and the loss run eagerly.
"""
import logging

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling

logger = logging.getLogger(__name__)


class GTELayer(nn.Module):
    def __init__(self, idx, hidden, ffn, heads, seq_len):
        super().__init__()
        self.idx = idx
        self.layer = te.TransformerLayer(hidden, ffn, heads, self_attn_mask_type="no_mask", params_dtype=torch.bfloat16)
        pos = torch.arange(seq_len).float()[:, None] / 10000 ** (torch.arange(0, hidden // heads, 2).float() / (hidden // heads))
        self.register_buffer("rope", torch.cat([pos, pos], -1)[:, None, None, :])
        self.segment_bias_np = np.linspace(0.0, 0.1, seq_len, dtype=np.float32)
        self.calls = 0

    def forward(self, hidden, is_first_microbatch=None):
        bias = torch.from_numpy(self.segment_bias_np).cuda()  # HAZARD: pinned-memory
        hidden = hidden + bias[:, None, None].to(hidden.dtype)
        out = self.layer(hidden, rotary_pos_emb=self.rope, is_first_microbatch=is_first_microbatch)  # CLEAN: rotary table is a registered buffer
        logger.debug(f"layer {self.idx} max activation {out.abs().max()}")  # HAZARD: host-sync
        self.calls += 1  # HAZARD: host-code
        return out


class GTEEncoder(nn.Module):
    def __init__(self, cfg, seq_len=128):
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList([GTELayer(i, cfg.hidden_size, cfg.intermediate_size, cfg.num_heads, seq_len)
                                     for i in range(cfg.num_layers)])


def graph_layers(model, cfg, seq_len=128, batch=256):
    recipe = DelayedScaling(amax_history_len=32, amax_compute_algo="max")
    x = torch.randn(seq_len, batch, cfg.hidden_size, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    graphed = te.make_graphed_callables(tuple(model.layers), tuple((x,) for _ in model.layers), enabled=True,
                                        recipe=recipe, cache_quantized_params=True)
    model.layers = nn.ModuleList(graphed)
    return recipe


def encode(model, recipe, ids, mask, first_micro):
    h = model.embed(ids).transpose(0, 1).contiguous()
    with te.autocast(enabled=True, recipe=recipe):  # CLEAN: replay inside te.autocast with the capture recipe
        for layer in model.layers:
            h = layer(h, is_first_microbatch=first_micro)  # CLEAN: is_first_microbatch passed on every replay
    h = h.transpose(0, 1).float()
    m = mask[..., None].float()
    return F.normalize((h * m).sum(1) / m.sum(1).clamp(min=1.0), dim=-1)


def mnrl_step(model, recipe, batch, opt, opt_step, scale=20.0):
    q = encode(model, recipe, batch["q_ids"].cuda(), batch["q_mask"].cuda(), True)
    p = encode(model, recipe, batch["p_ids"].cuda(), batch["p_mask"].cuda(), False)
    scores = q @ p.T * scale  # CLEAN: eager loss, scale fixed for the run
    labels = torch.arange(q.shape[0], device=q.device)
    loss = F.cross_entropy(scores, labels)
    loss.backward()
    opt_step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


def fit(model, cfg, loader, epochs=1, lr=2e-5, warmup=1000):
    recipe = graph_layers(model, cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    opt_step = torch.compile(opt.step, mode="reduce-overhead")
    step = 0
    for _ in range(epochs):
        for batch in loader:
            for g in opt.param_groups:
                g["lr"] = lr * min(1.0, (step + 1) / warmup)  # HAZARD: optimizer
            mnrl_step(model, recipe, batch, opt, opt_step)
            step += 1


@torch.no_grad()
def validate(model, recipe, loader):
    recalls = []
    for batch in loader:
        with te.autocast(enabled=True, recipe=recipe):
            h = model.embed(batch["q_ids"].cuda()).transpose(0, 1).contiguous()
            for layer in model.layers:
                h = layer(h)  # HAZARD: api-misuse
        q = F.normalize(h.transpose(0, 1).float().mean(1), dim=-1)
        p = encode(model, recipe, batch["p_ids"].cuda(), batch["p_mask"].cuda(), False)
        recalls.append(((q @ p.T).argmax(1) == torch.arange(q.shape[0], device=q.device)).float().mean())
    return torch.stack(recalls).mean().item()  # CLEAN: eager read after validation
