"""Jigsaw toxic-comment classification (6 labels) with a 4-layer Transformer Engine encoder in FP8.

The assistant converted the encoder layers and the head to TE graphed callables
("te.make_graphed_callables, FP8 weights cached across gradient-accumulation micro-batches").
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

LABELS = ["toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate"]
SEQ, MB, HID = 256, 16, 768


class ToxicHead(nn.Module):
    def __init__(self, label_bias):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(HID, HID), nn.Tanh(), nn.Linear(HID, len(LABELS)))
        self.label_bias = label_bias  # log prior per label from the training distribution

    def forward(self, pooled):
        return self.fc(pooled) + torch.tensor(self.label_bias, device=pooled.device)  # HAZARD: host-sync


def check_input(mod, args):
    assert args[0].dtype == torch.bfloat16


def build(vocab_size, label_bias):
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
    embed = nn.Embedding(vocab_size, HID).cuda().to(torch.bfloat16)
    layers = [
        te.TransformerLayer(HID, 4 * HID, 12, hidden_dropout=0.0, attention_dropout=0.0, self_attn_mask_type="no_mask", params_dtype=torch.bfloat16).cuda()
        for _ in range(4)
    ]
    head = ToxicHead(label_bias).cuda().to(torch.bfloat16)
    layers[0].register_forward_pre_hook(check_input)  # HAZARD: api-misuse
    samples = tuple((torch.randn(SEQ, MB, HID, device="cuda", dtype=torch.bfloat16, requires_grad=True),) for _ in layers)
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        g_layers = te.make_graphed_callables(tuple(layers), samples, enabled=True, recipe=recipe, cache_quantized_params=True)
    pooled = torch.randn(MB, HID, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    g_head = torch.cuda.make_graphed_callables(head, (pooled,))  # plain torch graph for the non-TE head
    return recipe, embed, layers, head, g_layers, g_head


def forward(recipe, embed, g_layers, g_head, ids, mask, first_micro):
    with te.autocast(enabled=True, recipe=recipe):  # CLEAN: replay under te.autocast with the capture recipe
        h = embed(ids).transpose(0, 1).contiguous()
        for layer in g_layers:
            h = layer(h, is_first_microbatch=first_micro)  # CLEAN: is_first_microbatch on every training replay
        m = mask.transpose(0, 1).unsqueeze(-1).to(h.dtype)
        pooled = (h * m).sum(0) / m.sum(0).clamp_min(1)  # CLEAN: masked mean on device
        return g_head(pooled)


def train(loader, val_loader, vocab_size, label_bias, accum=4, epochs=2):
    recipe, embed, layers, head, g_layers, g_head = build(vocab_size, label_bias)
    params = list(embed.parameters()) + [p for l in layers for p in l.parameters()] + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=2e-5, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LinearLR(opt, 1.0, 0.0, total_iters=epochs * len(loader) // accum)  # CLEAN: eager optimizer
    for epoch in range(epochs):
        for step, (ids, mask, y) in enumerate(loader):  # fixed (MB, SEQ) micro-batches
            logits = forward(recipe, embed, g_layers, g_head, ids.cuda(), mask.cuda(), step % accum == 0)
            loss = F.binary_cross_entropy_with_logits(logits.float(), y.cuda().float()) / accum
            loss.backward()
            if (step + 1) % accum == 0:
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
        print(f"epoch {epoch} val AUC proxy {validate(recipe, embed, g_layers, g_head, val_loader):.4f}")


@torch.no_grad()
def validate(recipe, embed, g_layers, g_head, val_loader):
    losses = []
    for ids, mask, y in val_loader:
        with te.autocast(enabled=True, recipe=recipe):
            h = embed(ids.cuda()).transpose(0, 1).contiguous()
            for layer in g_layers:
                h = layer(h)  # HAZARD: api-misuse
            m = mask.cuda().transpose(0, 1).unsqueeze(-1).to(h.dtype)
            logits = g_head((h * m).sum(0) / m.sum(0).clamp_min(1))
        losses.append(F.binary_cross_entropy_with_logits(logits.float(), y.cuda().float()).item())  # CLEAN: eager host read
    return 1.0 - sum(losses) / len(losses)
