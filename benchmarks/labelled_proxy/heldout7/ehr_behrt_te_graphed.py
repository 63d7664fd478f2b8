"""BEHRT-style next-visit diagnosis prediction from EHR code sequences.

Diagnosis codes, patient age and visit segment are embedded, passed through
Transformer Engine layers in FP8 and pooled into multi-label logits. Embedding,
layers and head are graphed together with TE make_graphed_callables (TE >= 2.9 names).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

MAX_LEN, HIDDEN, HEADS, N_LAYERS = 256, 384, 12, 6
N_CODES, N_DX = 8192, 1024


class BehrtEmbedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.code = nn.Embedding(N_CODES, HIDDEN, padding_idx=0)
        self.age = nn.Embedding(120, HIDDEN)
        self.segment = nn.Embedding(2, HIDDEN)
        self.pos = nn.Embedding(MAX_LEN, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN)
        self.code_drop_p = 0.0
        self.drop_gen = torch.Generator(device="cuda")
        self.drop_gen.manual_seed(42)

    def forward(self, codes, ages, segments):
        x = self.code(codes) + self.age(ages) + self.segment(segments) + self.pos.weight[: codes.shape[1]]
        p = self.code_drop_p  # HAZARD: python-scalar
        drop = torch.rand(codes.shape, device=codes.device, generator=self.drop_gen) < p  # HAZARD: rng
        x = x.masked_fill(drop.unsqueeze(-1), 0.0)
        return self.norm(x).transpose(0, 1).contiguous()          # (seq, batch, hidden) for TE


class DxHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = te.Linear(HIDDEN, HIDDEN)
        self.out = nn.Linear(HIDDEN, N_DX)

    def forward(self, x):
        return self.out(torch.tanh(self.proj(x.mean(0))))


class Behrt(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = BehrtEmbedding()
        self.layers = nn.ModuleList([
            te.TransformerLayer(HIDDEN, 4 * HIDDEN, HEADS, hidden_dropout=0.1, attention_dropout=0.1,
                                self_attn_mask_type="no_mask", layer_number=i + 1)
            for i in range(N_LAYERS)])
        self.head = DxHead()


def check_seq_len(module, args):
    assert args[0].shape[0] <= MAX_LEN, "sequence longer than the position table"


def graph_behrt(model, batch=64, device="cuda"):
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
    for layer in model.layers:
        layer.register_forward_pre_hook(check_seq_len)  # HAZARD: api-misuse
    ids = torch.ones(batch, MAX_LEN, dtype=torch.long, device=device)
    hid = torch.randn(MAX_LEN, batch, HIDDEN, device=device, requires_grad=True)
    modules = (model.embed, *model.layers, model.head)
    samples = ((ids, ids.clone(), torch.zeros_like(ids)),) + tuple((hid,) for _ in range(N_LAYERS + 1))
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        graphed = te.make_graphed_callables(modules, samples, num_warmup_iters=3, enabled=True,
                                            recipe=recipe, cache_quantized_params=False)
    return graphed, recipe


def train(model, loader, epochs=20, device="cuda"):
    model.to(device).train()
    graphed, recipe = graph_behrt(model, device=device)
    g_embed, g_layers, g_head = graphed[0], graphed[1:-1], graphed[-1]
    alerts = []
    model.head.register_forward_hook(lambda m, i, o: alerts.append(o.detach().amax()))  # CLEAN: hook registered after graphing
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=0.01)
    for epoch in range(epochs):
        model.embed.code_drop_p = 0.15 * min(1.0, epoch / 5)
        for codes, ages, segments, target in loader:
            codes, ages, segments, target = (t.to(device, non_blocking=True) for t in (codes, ages, segments, target))
            with te.autocast(enabled=True, recipe=recipe):  # CLEAN: replay under TE autocast with the capture recipe
                x = g_embed(codes, ages, segments)
                for layer in g_layers:
                    x = layer(x)
                logits = g_head(x)
            loss = F.binary_cross_entropy_with_logits(logits.float(), target.float())
            opt.zero_grad(set_to_none=False)
            loss.backward()
            opt.step()
    return model
