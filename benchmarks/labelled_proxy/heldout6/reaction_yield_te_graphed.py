"""Reaction-yield regression (Yield-BERT style) on tokenised reaction SMILES.

Buchwald-Hartwig / Suzuki HTE datasets: reactants>reagents>product strings are
tokenised with a regex SMILES tokenizer and padded to 256 tokens. The encoder blocks are
Transformer Engine layers with per-layer residual scaling, graphed together with
te.make_graphed_callables (FP8, TE >= 2.9 keyword names).
"""
import torch
import torch.nn as nn
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

SEQ, BATCH, D, HEADS, LAYERS, VOCAB = 256, 32, 512, 8, 6, 600


class ScaledBlock(nn.Module):
    def __init__(self, idx, layer_scales, aug_gen=None):
        super().__init__()
        self.layer = te.TransformerLayer(D, 4 * D, HEADS, hidden_dropout=0.1, attention_dropout=0.1)
        self.idx, self.layer_scales, self.aug_gen = idx, layer_scales, aug_gen

    def forward(self, x):
        if self.aug_gen is not None:
            keep = torch.rand(x.shape[:2], device=x.device, generator=self.aug_gen) > 0.05  # HAZARD: rng
            x = x * keep.unsqueeze(-1).to(x.dtype)
        gammas = torch.tensor(self.layer_scales, device=x.device)  # HAZARD: host-sync
        return x + gammas[self.idx] * (self.layer(x) - x)


def check_finite(mod, args):
    if not torch.isfinite(args[0]).all():
        raise FloatingPointError(f"non-finite input to {mod.__class__.__name__}")


def build_encoder(aug_seed=0):
    aug_gen = torch.Generator(device="cuda")
    aug_gen.manual_seed(aug_seed)
    scales = [1.0 / (i + 1) ** 0.5 for i in range(LAYERS)]
    blocks = [ScaledBlock(i, scales, aug_gen if i == 0 else None).cuda() for i in range(LAYERS)]
    for b in blocks:
        b.register_forward_pre_hook(check_finite)  # HAZARD: api-misuse
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
    sample = tuple((torch.randn(SEQ, BATCH, D, device="cuda", requires_grad=True),) for _ in range(LAYERS))
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        graphed = te.make_graphed_callables(tuple(blocks), sample, num_warmup_iters=3, enabled=True,
                                            recipe=recipe, cache_quantized_params=True)
    blocks[-1].register_forward_hook(lambda m, a, out: None)  # CLEAN: hook registered after graphing
    return blocks, graphed, recipe


class YieldModel(nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D, padding_idx=0)
        self.pos = nn.Parameter(torch.zeros(SEQ, 1, D))
        self.blocks = nn.ModuleList(blocks)
        self.head = nn.Sequential(nn.LayerNorm(D), nn.Linear(D, 1))

    def forward(self, ids, graphed):
        x = self.tok(ids).transpose(0, 1) + self.pos
        for g in graphed:
            x = g(x)
        pad = (ids != 0).T.unsqueeze(-1).float()
        return self.head((x * pad).sum(0) / pad.sum(0)).squeeze(-1)


def train(loader, y_mean, y_std, epochs=30):
    blocks, graphed, recipe = build_encoder()
    model = YieldModel(blocks).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=0.01)
    for ep in range(epochs):
        for ids, y in loader():
            with te.autocast(enabled=True, recipe=recipe):
                pred = model(ids, graphed)
            loss = nn.functional.mse_loss(pred, (y - y_mean) / y_std)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()  # CLEAN: eager optimizer step outside the graphed layers
        print(f"epoch {ep} rmse {(loss.sqrt() * y_std).item():.2f}% yield")  # CLEAN: host read outside the graphs
    return model, graphed


if __name__ == "__main__":
    def loader(n=100):
        for _ in range(n):
            yield torch.randint(1, VOCAB, (BATCH, SEQ), device="cuda"), 100 * torch.rand(BATCH, device="cuda")
    train(loader, y_mean=33.0, y_std=27.0)
