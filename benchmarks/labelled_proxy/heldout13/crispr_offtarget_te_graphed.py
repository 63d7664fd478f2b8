"""CRISPR-Cas9 off-target cleavage scoring: sgRNA / genomic-site pairs (23 nt incl.
PAM, plus a CLS token) are encoded as pair tokens and scored by Transformer Engine
layers in FP8, graphed with TE make_graphed_callables (TE >= 2.9 keyword names).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common import recipe

L, D, HEADS = 24, 256, 8  # 23 nt + CLS
N_TOK = 5  # A, C, G, T, CLS/pad


class PairEmbedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(N_TOK * N_TOK, D)
        self.pos = nn.Parameter(torch.zeros(1, L, D))
        self.mm_bias = nn.Parameter(torch.zeros(D))
        self.drop_gen = torch.Generator(device="cuda")
        self.drop_gen.manual_seed(5)

    def forward(self, guide, target):
        x = self.tok(guide * N_TOK + target) + self.pos
        mm = (guide != target).nonzero()  # HAZARD: dynamic-shape
        x = x.index_put((mm[:, 0], mm[:, 1]), self.mm_bias, accumulate=True)
        keep = torch.rand(x.shape[:2], device=x.device, generator=self.drop_gen) > 0.1  # HAZARD: rng
        return x * keep.unsqueeze(-1)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = te.TransformerLayer(
            D, 4 * D, HEADS, hidden_dropout=0.0, attention_dropout=0.0,
            self_attn_mask_type="padding", attn_input_format="bshd")

    def forward(self, x, attention_mask):
        return self.layer(x, attention_mask=attention_mask)


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, 1)

    def forward(self, x):
        return self.fc(x[:, 0]).squeeze(-1)


def trace_shapes(module, args):
    module.seen_shape = tuple(args[0].shape)


def build(n_layers=4, B=64, device="cuda"):
    fp8 = recipe.DelayedScaling(fp8_format=recipe.Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
    emb, head = PairEmbedding().to(device), Scorer().to(device)
    blocks = [Block().to(device) for _ in range(n_layers)]
    for blk in blocks:
        blk.register_forward_pre_hook(trace_shapes)  # HAZARD: api-misuse
    tok = torch.randint(0, 4, (B, L), device=device)
    x = torch.randn(B, L, D, device=device, requires_grad=True)
    pad = torch.zeros(B, 1, 1, L, dtype=torch.bool, device=device)
    modules = (emb, *blocks, head)
    args = ((tok, tok),) + tuple((x,) for _ in blocks) + ((x,),)
    kwargs = ({},) + tuple({"attention_mask": pad} for _ in blocks) + ({},)
    with torch.amp.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        graphed = te.make_graphed_callables(
            modules, args, num_warmup_iters=3, sample_kwargs=kwargs,
            enabled=True, recipe=fp8, cache_quantized_params=False)
    head.register_forward_hook(lambda m, i, o: None)  # CLEAN: hook added after graphing
    return graphed, fp8


def train(steps=1000, B=64, device="cuda"):
    graphed, fp8 = build(B=B, device=device)
    g_emb, *g_blocks, g_head = graphed
    opt = torch.optim.AdamW([p for m in graphed for p in m.parameters()], lr=1e-4)
    pad = torch.zeros(B, 1, 1, L, dtype=torch.bool, device=device)
    for step in range(steps):
        guide = torch.randint(0, 4, (B, L), device=device)
        target = torch.where(torch.rand(B, L, device=device) < 0.1, torch.randint_like(guide, 0, 4), guide)
        cleaved = torch.rand(B, device=device)  # GUIDE-seq read fraction, rescaled
        with te.autocast(enabled=True, recipe=fp8):  # CLEAN: TE autocast around the replays
            h = g_emb(guide, target)
            for blk in g_blocks:
                h = blk(h, attention_mask=pad)  # CLEAN: keyword declared in sample_kwargs
            logit = g_head(h)
        loss = F.binary_cross_entropy_with_logits(logit.float(), cleaved)
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()
        if step % 100 == 0:
            print(step, loss.item())


if __name__ == "__main__":
    train()
