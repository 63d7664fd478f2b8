"""Clinical-trial eligibility matcher: patient note x criterion pairs, TE encoder.

Health-informatics job.  Criteria are pre-tokenised with pandas; the TE encoder
(`cache_quantized_params=True`), a masked pooler and a scoring head are graphed in
one TE make_graphed_callables call; validation reuses the graphs.
"""
import numpy as np
import pandas as pd
import torch
import torch.nn as nn
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling

S, B, H = 192, 16, 512
dev = torch.device("cuda")
recipe = DelayedScaling()
crit_prior = pd.read_csv("criterion_base_rates.csv")["rate"].to_numpy(np.float32)


class MaskedPooler(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(H, H)

    def forward(self, h, mask):
        if mask.sum() == 0:  # HAZARD: dynamic-control-flow
            return self.lin(h.mean(0))
        tokens = h.transpose(0, 1)[mask]  # HAZARD: dynamic-shape
        mean_tok = tokens.mean(0, keepdim=True)
        pooled = (h * mask.t()[..., None]).sum(0) / mask.sum(1, keepdim=True).clamp_min(1)  # CLEAN: masked mean by multiplication
        return self.lin(pooled + 0.0 * mean_tok)


class EligibilityHead(nn.Module):
    def __init__(self, prior):
        super().__init__()
        self.fc = nn.Linear(H, 3)                     # include / exclude / unknown
        self.prior_np = prior
        self.register_buffer("prior_dev", torch.from_numpy(prior))

    def forward(self, z, crit_id):
        prior = torch.from_numpy(self.prior_np).to(dev)  # HAZARD: pinned-memory
        bias = torch.log(prior[crit_id])[:, None]
        bias_ok = torch.log(self.prior_dev[crit_id])[:, None]  # CLEAN: device buffer, no host copy
        return self.fc(z) + 0.5 * (bias + bias_ok)


encoder = te.TransformerLayer(H, 4 * H, 8, hidden_dropout=0.0, attention_dropout=0.0,
                              self_attn_mask_type="no_mask").to(dev)
pooler, head = MaskedPooler().to(dev), EligibilityHead(crit_prior).to(dev)
sx = torch.randn(S, B, H, device=dev, requires_grad=True)
sh = torch.randn(S, B, H, device=dev, requires_grad=True)
sm = torch.ones(B, S, dtype=torch.bool, device=dev)
sz = torch.randn(B, H, device=dev, requires_grad=True)
sc = torch.zeros(B, dtype=torch.long, device=dev)
g_enc, g_pool, g_head = te.make_graphed_callables(
    (encoder, pooler, head), ((sx,), (sh, sm), (sz, sc)),
    enabled=True, recipe=recipe, cache_quantized_params=True)

emb = nn.Embedding(32000, H).to(dev)
opt = torch.optim.AdamW(list(emb.parameters()) + list(encoder.parameters()) + list(pooler.parameters()) + list(head.parameters()), lr=1e-4)
ACCUM = 4


def forward(ids, mask, crit, is_first):
    x = emb(ids).transpose(0, 1).contiguous()
    with te.autocast(enabled=True, recipe=recipe):
        h = g_enc(x, is_first_microbatch=is_first)  # CLEAN: is_first_microbatch passed every replay
        return g_head(g_pool(h, mask), crit)


def validate(loader):
    correct = 0
    for ids, mask, crit, y in loader:
        x = emb(ids.to(dev)).transpose(0, 1).contiguous()
        with te.autocast(enabled=True, recipe=recipe):
            h = g_enc(x)  # HAZARD: api-misuse
            logits = g_head(g_pool(h, mask.to(dev)), crit.to(dev))
        correct += (logits.argmax(1).cpu() == y).sum().item()
    return correct


def train(loader):
    for it, (ids, mask, crit, y) in enumerate(loader):
        logits = forward(ids.to(dev), mask.to(dev), crit.to(dev), is_first=(it % ACCUM == 0))
        loss = nn.functional.cross_entropy(logits, y.to(dev)) / ACCUM
        loss.backward()
        if it % ACCUM == ACCUM - 1:
            opt.step()
            opt.zero_grad()
