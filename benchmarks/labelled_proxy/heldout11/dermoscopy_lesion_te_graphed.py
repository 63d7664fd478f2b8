"""Melanoma / nevus / BCC triage from dermoscopy images (ISIC-style, 8 classes).

A convolutional patch stem feeds six Transformer Engine layers and a temperature-calibrated
head. Stem, blocks and head are graphed with transformer_engine's make_graphed_callables
(FP8, delayed scaling) and replayed inside te.autocast.
"""
import torch
import torch.nn as nn
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

D, HEADS, N_PATCH, B = 384, 6, 196, 32


class PatchStem(nn.Module):
    def __init__(self, p_drop=0.1):
        super().__init__()
        self.p_drop = p_drop
        self.gen = torch.Generator(device="cuda").manual_seed(1)
        self.conv = nn.Sequential(nn.Conv2d(3, 96, 4, stride=4), nn.GELU(), nn.Conv2d(96, D, 4, stride=4))

    def forward(self, img):
        x = self.conv(img).flatten(2).permute(2, 0, 1)                   # (196, B, D)
        keep = torch.rand(x.shape[0], x.shape[1], 1, device=x.device, generator=self.gen) > self.p_drop  # HAZARD: rng
        return x * keep


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = te.TransformerLayer(D, 4 * D, HEADS, hidden_dropout=0.0, attention_dropout=0.0,
                                         self_attn_mask_type="padding")

    def forward(self, x, attention_mask=None):
        return self.layer(x, attention_mask=attention_mask)


class CalibratedHead(nn.Module):
    def __init__(self, n_cls=8):
        super().__init__()
        self.norm, self.fc = nn.LayerNorm(D), nn.Linear(D, n_cls)
        self.temperature = 1.0                                           # refit on the hospital's validation split

    def forward(self, x):
        t = self.temperature  # HAZARD: python-scalar
        return self.fc(self.norm(x.mean(0))) / t


def audit_tokens(module, args):
    module.n_calls = getattr(module, "n_calls", 0) + 1


def build():
    stem, head = PatchStem().cuda(), CalibratedHead().cuda()
    blocks = [Block().cuda() for _ in range(6)]
    for blk in blocks:
        blk.register_forward_pre_hook(audit_tokens)  # HAZARD: api-misuse
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
    img = torch.randn(B, 3, 224, 224, device="cuda")
    tok = torch.randn(N_PATCH, B, D, device="cuda", requires_grad=True)
    mask = torch.zeros(B, 1, 1, N_PATCH, dtype=torch.bool, device="cuda")
    modules = (stem, *blocks, head)
    args = ((img,),) + tuple((tok,) for _ in blocks) + ((tok,),)
    kwargs = ({},) + tuple({"attention_mask": mask} for _ in blocks) + ({},)
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        graphed = te.make_graphed_callables(modules, args, sample_kwargs=kwargs, num_warmup_iters=3,
                                            enabled=True, recipe=recipe, cache_quantized_params=False)
    head.register_forward_hook(lambda m, a, out: None)  # CLEAN: hook registered after graphing is allowed
    return modules, graphed, recipe


def train(loader, epochs=40):
    modules, graphed, recipe = build()
    g_stem, *g_blocks, g_head = graphed
    opt = torch.optim.AdamW([p for m in modules for p in m.parameters()], lr=2e-4, weight_decay=0.05)
    for epoch in range(epochs):
        for img, pad_mask, y in loader:
            with te.autocast(enabled=True, recipe=recipe):  # CLEAN: replays run inside te.autocast with the capture recipe
                x = g_stem(img)
                for blk in g_blocks:
                    x = blk(x, attention_mask=pad_mask)  # CLEAN: keyword declared in sample_kwargs
                logits = g_head(x)
            loss = nn.functional.cross_entropy(logits.float(), y, label_smoothing=0.1)
            opt.zero_grad(set_to_none=False)
            loss.backward()
            opt.step()
        modules[-1].temperature = 1.0 + 0.05 * epoch


if __name__ == "__main__":
    data = [(torch.rand(B, 3, 224, 224, device="cuda"), torch.zeros(B, 1, 1, N_PATCH, dtype=torch.bool, device="cuda"),
             torch.randint(0, 8, (B,), device="cuda")) for _ in range(6)]
    train(data, epochs=2)
