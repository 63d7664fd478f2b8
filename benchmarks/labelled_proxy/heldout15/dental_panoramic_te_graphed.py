"""FDI tooth numbering on panoramic dental radiographs.

Each 1280x640 panoramic image is cut into 800 patches of 32x32; a Transformer
Engine encoder (FP8, delayed scaling) labels every patch with one of 32 FDI
tooth numbers or background. The encoder is graphed with TE make_graphed_callables,
quantised weights cached across the micro-batches of one optimizer step.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

HID, HEADS, FFN, LAYERS = 512, 8, 2048, 6
N_TOK, PATCH, MB, N_MICRO, N_CLS = 800, 1024, 8, 4, 33


class PatchEmbed(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(PATCH, HID)
        self.pos = nn.Parameter(torch.zeros(N_TOK, 1, HID))

    def forward(self, patches):                                   # [N_TOK, MB, PATCH]
        return self.proj(patches) + self.pos


class ToothEncoder(nn.Module):
    def __init__(self, token_drop=0.1):
        super().__init__()
        self.token_drop = token_drop
        self.drop_gen = torch.Generator(device="cuda")
        self.drop_gen.manual_seed(1)
        self.layers = nn.ModuleList([
            te.TransformerLayer(HID, FFN, HEADS, hidden_dropout=0.0, attention_dropout=0.0,
                                self_attn_mask_type="padding", params_dtype=torch.bfloat16)
            for _ in range(LAYERS)])

    def forward(self, h, attention_mask):
        keep = torch.rand(h.shape[0], h.shape[1], 1, device=h.device, generator=self.drop_gen) > self.token_drop  # HAZARD: rng
        h = h * keep
        for layer in self.layers:
            h = layer(h, attention_mask=attention_mask)
        return h


def load_ssl_checkpoint(encoder, path):
    state = torch.load(path, map_location="cuda")
    for name, p in encoder.named_parameters():
        if name in state:
            p.data = state[name].to(p.dtype)  # HAZARD: static-address


def build():
    embed, encoder, head = PatchEmbed().cuda(), ToothEncoder().cuda(), nn.Linear(HID, N_CLS).cuda()
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
    h0 = torch.randn(N_TOK, MB, HID, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    mask0 = torch.zeros(MB, 1, 1, N_TOK, dtype=torch.bool, device="cuda")
    with torch.amp.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        enc_g = te.make_graphed_callables(
            encoder, (h0,), sample_kwargs={"attention_mask": mask0}, num_warmup_iters=3,
            enabled=True, recipe=recipe, cache_quantized_params=True)
    return embed, encoder, enc_g, head, recipe


def train(loader, val_loader, ssl_ckpt, epochs=20):
    embed, encoder, enc_g, head, recipe = build()
    load_ssl_checkpoint(encoder, ssl_ckpt)
    params = list(embed.parameters()) + list(encoder.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=2e-4, weight_decay=0.05)
    for epoch in range(epochs):
        for micro in loader:                                     # list of N_MICRO (patches, mask, labels)
            for i, (patches, mask, labels) in enumerate(micro):
                h = embed(patches.cuda()).to(torch.bfloat16)
                with te.autocast(enabled=True, recipe=recipe):  # CLEAN: replay under te.autocast with the capture recipe
                    h = enc_g(h, attention_mask=mask.cuda(), is_first_microbatch=(i == 0))  # CLEAN: flag and declared keyword on every replay
                loss = F.cross_entropy(head(h.float()).flatten(0, 1), labels.cuda().t().flatten(), ignore_index=-1)
                (loss / N_MICRO).backward()
            opt.step()
            opt.zero_grad()
        correct = total = 0
        with torch.no_grad():
            for patches, mask, labels in val_loader:
                with te.autocast(enabled=True, recipe=recipe):
                    h = enc_g(embed(patches.cuda()).to(torch.bfloat16), attention_mask=mask.cuda())  # HAZARD: api-misuse
                pred = head(h.float()).argmax(-1).t().cpu()
                valid = labels >= 0
                correct += (pred[valid] == labels[valid]).sum().item()
                total += valid.sum().item()
        print(f"epoch {epoch}: patch accuracy {correct / max(total, 1):.3f}")
