"""Stanford Ribonanza RNA Folding (Kaggle 2023) -- Transformer Engine / FP8 training script.

Transformer encoder over nucleotides (A, C, G, U) predicting 2A3 and DMS reactivity per
position; sequences padded to 208.  The embedding and 8 TE TransformerLayers are graphed with
TE's make_graphed_callables; the masked L1 loss on NaN-padded targets stays eager.
"""
import numpy as np
import pandas as pd
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common import recipe

L, B, D, HEADS, LAYERS = 208, 64, 256, 8, 8
VOCAB = {"A": 1, "C": 2, "G": 3, "U": 4}
fp8_recipe = recipe.DelayedScaling(fp8_format=recipe.Format.HYBRID, amax_history_len=16, amax_compute_algo="max")


class NucEmbed(nn.Module):
    def __init__(self, mask_prob=0.1):
        super().__init__()
        self.emb = nn.Embedding(5, D, padding_idx=0)
        self.pos = nn.Parameter(torch.randn(L, 1, D) * 0.02)
        self.mask_prob = mask_prob
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(2023)
        self.seq_lens = None

    def forward(self, tokens):                                  # tokens: L x B int64, 0 = pad
        keep = torch.rand(tokens.shape, device=tokens.device, generator=self.gen) > self.mask_prob  # HAZARD: rng
        x = self.emb(tokens * keep) + self.pos
        self.seq_lens = (tokens > 0).sum(0).tolist()  # HAZARD: host-sync
        return x


class ReactivityHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(D)
        self.out = nn.Linear(D, 2)

    def forward(self, x):
        return self.out(self.norm(x))


def pre_hook(module, args, kwargs):
    module.n_calls = getattr(module, "n_calls", 0) + 1


def build_and_graph():
    embed = NucEmbed().cuda().to(torch.bfloat16)
    layers = [te.TransformerLayer(D, 4 * D, HEADS, hidden_dropout=0.0, attention_dropout=0.0,
                                  self_attn_mask_type="padding", params_dtype=torch.bfloat16).cuda()
              for _ in range(LAYERS)]
    for layer in layers:
        layer.register_forward_pre_hook(pre_hook, with_kwargs=True)  # HAZARD: api-misuse
    tok = torch.ones(L, B, dtype=torch.long, device="cuda")
    hid = torch.randn(L, B, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    pad = torch.zeros(B, 1, 1, L, dtype=torch.bool, device="cuda")
    with torch.amp.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        graphed = te.make_graphed_callables(
            (embed, *layers), ((tok,),) + tuple((hid,) for _ in layers),
            sample_kwargs=({},) + tuple({"attention_mask": pad} for _ in layers),
            enabled=True, recipe=fp8_recipe, cache_quantized_params=False)
    return (embed, layers, ReactivityHead().cuda()), graphed[0], list(graphed[1:])


def masked_l1(pred, target):
    mask = ~torch.isnan(target)
    return F.l1_loss(pred[mask], target[mask].clamp(0, 1))  # CLEAN: eager loss on the graphed outputs, not inside any graph


def encode(df):
    seqs = np.zeros((len(df), L), np.int64)
    react = np.full((len(df), L, 2), np.nan, np.float32)
    for i, (s, r2, rd) in enumerate(zip(df.sequence, df.react_2A3, df.react_DMS)):
        seqs[i, :len(s)] = [VOCAB[c] for c in s]
        react[i, :len(s), 0], react[i, :len(s), 1] = r2[:len(s)], rd[:len(s)]
    return seqs, react


def train(df_path="train_data_pivot.parquet", epochs=30):
    seqs, react = encode(pd.read_parquet(df_path))
    (embed, layers, head), g_embed, g_layers = build_and_graph()
    params = [p for m in (embed, *layers, head) for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=5e-4, weight_decay=0.05)
    for epoch in range(epochs):
        for idx in np.random.permutation(len(seqs) // B * B).reshape(-1, B):
            tok = torch.from_numpy(seqs[idx].T.copy()).cuda(non_blocking=True)
            tgt = torch.from_numpy(react[idx].transpose(1, 0, 2).copy()).cuda(non_blocking=True)
            pad = (tok == 0).T[:, None, None, :]
            with te.autocast(enabled=True, recipe=fp8_recipe):  # CLEAN: replays run under te.autocast with the capture recipe
                x = g_embed(tok)
                for layer in g_layers:
                    x = layer(x, attention_mask=pad)  # CLEAN: keyword declared in sample_kwargs at graphing time
            loss = masked_l1(head(x.float()), tgt)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        print(f"epoch {epoch}  masked L1 {loss.item():.4f}")
    torch.save({"embed": embed.state_dict(), "head": head.state_dict(),
                "layers": [l.state_dict() for l in layers]}, "ribonanza_te.pt")


if __name__ == "__main__":
    train()
