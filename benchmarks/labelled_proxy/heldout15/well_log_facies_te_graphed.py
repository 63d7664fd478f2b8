"""Lithofacies classification from wireline logs (GR, RHOB, NPHI, DT, RT, PEF).

512-sample depth windows (0.1524 m spacing) go through a log embedding and a
Transformer Engine encoder; every depth sample gets one of nine facies. Both
parts are graphed with TE make_graphed_callables (FP8, current scaling).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import Float8CurrentScaling

SEQ, B, N_LOGS, HID, HEADS, FFN, LAYERS, N_FACIES = 512, 16, 6, 256, 8, 1024, 4, 9
NULL = -999.25


class LogEmbed(nn.Module):
    def __init__(self, shale_cutoff=110.0):
        super().__init__()
        self.shale_cutoff = shale_cutoff                 # API units, picked per well by the petrophysicist
        self.noise_gen = torch.Generator(device="cuda")
        self.noise_gen.manual_seed(5)
        self.proj = nn.Linear(N_LOGS + 1, HID)
        self.norm = te.LayerNorm(HID)

    def forward(self, logs):                             # [SEQ, B, N_LOGS]
        logs = logs.masked_fill(logs <= NULL + 1.0, 0.0)  # CLEAN: nulls masked without a data-dependent shape
        gr = logs[..., 0]
        gr_sand = gr.amin().item()  # HAZARD: host-sync
        cutoff = self.shale_cutoff  # HAZARD: python-scalar
        vsh = ((gr - gr_sand) / max(cutoff - gr_sand, 1.0)).clamp(0.0, 1.0)
        x = torch.cat([logs, vsh.unsqueeze(-1)], -1)
        x = x + 0.01 * torch.randn(x.shape, device=x.device, generator=self.noise_gen)  # HAZARD: rng
        return self.norm(self.proj(x))


layers = nn.ModuleList([
    te.TransformerLayer(HID, FFN, HEADS, hidden_dropout=0.0, attention_dropout=0.0,
                        self_attn_mask_type="no_mask", params_dtype=torch.float32)
    for _ in range(LAYERS)]).cuda()


def encode(h):
    for layer in layers:
        h = layer(h)
    return h


def build(recipe):
    embed = LogEmbed().cuda()
    logs0 = torch.randn(SEQ, B, N_LOGS, device="cuda") * 20 + 60
    h0 = torch.randn(SEQ, B, HID, device="cuda", requires_grad=True)
    embed_g = te.make_graphed_callables(embed, (logs0,), enabled=True, recipe=recipe, cache_quantized_params=False)
    enc_g = te.make_graphed_callables(encode, (h0,), enabled=True, recipe=recipe, cache_quantized_params=False)  # HAZARD: api-misuse
    return embed, embed_g, enc_g


def train(wells, epochs=15):
    recipe = Float8CurrentScaling()
    embed, embed_g, enc_g = build(recipe)
    head = nn.Linear(HID, N_FACIES).cuda()
    params = list(embed.parameters()) + list(layers.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=3e-4, weight_decay=0.01)
    for epoch in range(epochs):
        for well in wells:
            embed.shale_cutoff = well["gr_shale"]
            for logs, facies in well["windows"]:
                with te.autocast(enabled=True, recipe=recipe):  # CLEAN: replays under te.autocast with the capture recipe
                    h = enc_g(embed_g(logs.cuda(non_blocking=True)))
                logits = head(h)
                loss = F.cross_entropy(logits.flatten(0, 1), facies.cuda().flatten(), ignore_index=-1)
                loss.backward()
                opt.step()
                opt.zero_grad()
        print(f"epoch {epoch}: loss {loss.item():.3f}")  # CLEAN: host read outside the graphs
