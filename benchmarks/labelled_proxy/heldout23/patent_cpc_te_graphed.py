"""Patent abstract -> CPC subclass classifier on Transformer Engine layers (FP8).

IP-analytics team: tokenised abstracts come from a pandas/pyarrow pipeline; the
encoder stack and a mixup classification head are graphed with TE's
make_graphed_callables (TE >= 2.9 keyword names).
"""
import pandas as pd
import torch
import torch.nn as nn
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

SEQ, BATCH, HID, HEADS, LAYERS = 256, 32, 768, 12, 6
N_CPC = 656
VOCAB = 50_000
dev = "cuda"
recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")


class MixupHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = te.LayerNorm(HID)
        self.proj = te.Linear(HID, N_CPC)
        self.mix_gen = torch.Generator(device=dev)
        self.mix_gen.manual_seed(5)
        self.logit_scale = 1.0

    def forward(self, h):
        pooled = self.norm(h.mean(0))
        lam = torch.rand(BATCH, 1, device=dev, generator=self.mix_gen)  # HAZARD: rng
        pooled = lam * pooled + (1 - lam) * pooled.roll(1, 0)
        scale = self.logit_scale  # HAZARD: python-scalar
        jitter = 1e-3 * torch.rand_like(pooled)  # CLEAN: default CUDA generator, captured by torch
        return self.proj(pooled + jitter) * scale


embed = nn.Embedding(VOCAB, HID).to(dev)
layers = [te.TransformerLayer(HID, 4 * HID, HEADS, hidden_dropout=0.0, attention_dropout=0.0,
                              self_attn_mask_type="no_mask", params_dtype=torch.bfloat16).to(dev)
          for _ in range(LAYERS)]
head = MixupHead().to(dev)
token_counts = {}
for i, layer in enumerate(layers):
    layer.register_forward_pre_hook(lambda m, a, i=i: token_counts.__setitem__(i, a[0].shape[0]))  # HAZARD: api-misuse

samples = [(torch.randn(SEQ, BATCH, HID, device=dev, dtype=torch.bfloat16, requires_grad=True),)
           for _ in range(LAYERS)]
samples.append((torch.randn(SEQ, BATCH, HID, device=dev, dtype=torch.bfloat16, requires_grad=True),))
with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
    graphed = te.make_graphed_callables(tuple(layers) + (head,), tuple(samples),
                                        num_warmup_iters=3, enabled=True, recipe=recipe)
g_layers, g_head = graphed[:-1], graphed[-1]
head.register_forward_hook(lambda m, i, o: None)  # CLEAN: hook added after graphing

params = list(embed.parameters()) + [p for l in layers for p in l.parameters()] + list(head.parameters())
opt = torch.optim.AdamW(params, lr=2e-4)


def batches(path="cpc_tokens.parquet"):
    df = pd.read_parquet(path)
    for i in range(0, len(df) - BATCH + 1, BATCH):
        chunk = df.iloc[i:i + BATCH]
        ids = torch.tensor(chunk["input_ids"].tolist(), dtype=torch.long)[:, :SEQ]
        yield ids.t().contiguous(), torch.tensor(chunk["cpc_label"].to_numpy())


for step, (ids, labels) in enumerate(batches()):
    if step < 1000:
        head.logit_scale = 1.0 + step / 1000.0
    x = embed(ids.to(dev)).to(torch.bfloat16)
    with te.autocast(enabled=True, recipe=recipe):  # CLEAN: TE autocast around replay, matches capture
        for gl in g_layers:
            x = gl(x)
        logits = g_head(x)
    loss = nn.functional.cross_entropy(logits.float(), labels.to(dev))
    opt.zero_grad()
    loss.backward()
    opt.step()
