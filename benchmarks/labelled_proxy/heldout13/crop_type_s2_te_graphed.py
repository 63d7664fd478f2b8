"""Parcel-level crop-type mapping from Sentinel-2 time series (10 bands x 32
acquisition dates per season). The temporal encoder is built from Transformer
Engine layers graphed with cached FP8 weights and trained with gradient
accumulation over micro-batches.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common import recipe

T, BANDS, D, N_CROPS = 32, 10, 128, 18
ZONE_SHIFT_DAYS = {"atlantic": 0, "continental": 9, "alpine": 21, "mediterranean": -14}


class DateEmbedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(BANDS, D)
        self.register_buffer("freq", torch.logspace(-3, 0, D // 2))
        self.phenology_shift = 0  # days, per agro-climatic zone

    def forward(self, refl, doy, cloud):
        doy = doy + self.phenology_shift  # HAZARD: python-scalar
        ang = doy.unsqueeze(-1) * self.freq
        x = self.proj(refl) + torch.cat([torch.sin(ang), torch.cos(ang)], -1)
        if cloud.float().mean() > 0.9:  # HAZARD: dynamic-control-flow
            x = x * 0.0  # nearly all dates cloudy: fall back to the prior
        return x.masked_fill(cloud.unsqueeze(-1), 0.0)  # CLEAN: masked_fill keeps the shape


class CropHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, N_CROPS)
        self.coverage = []

    def forward(self, h, cloud):
        self.coverage.extend((~cloud).sum(1).tolist())  # HAZARD: host-sync
        w = (~cloud).float().unsqueeze(-1)
        pooled = (h * w).sum(1) / w.sum(1).clamp_min(1.0)
        return self.fc(pooled)


def build(n_layers=3, B=64, device="cuda"):
    fp8 = recipe.DelayedScaling(fp8_format=recipe.Format.HYBRID, amax_history_len=16)
    emb, head = DateEmbedding().to(device), CropHead().to(device)
    layers = [te.TransformerLayer(D, 4 * D, 8, hidden_dropout=0.0, attention_dropout=0.0,
                                  attn_input_format="bshd").to(device) for _ in range(n_layers)]
    refl = torch.randn(B, T, BANDS, device=device)
    doy = (torch.arange(T, device=device).float() * 10).expand(B, T).contiguous()
    cloud = torch.zeros(B, T, dtype=torch.bool, device=device)
    x = torch.randn(B, T, D, device=device, requires_grad=True)
    modules = (emb, *layers, head)
    args = ((refl, doy, cloud),) + tuple((x,) for _ in layers) + ((x, cloud),)
    graphed = te.make_graphed_callables(modules, args, enabled=True, recipe=fp8, cache_quantized_params=True)
    return graphed, fp8


def forward(graphed, refl, doy, cloud, **flags):
    g_emb, *g_layers, g_head = graphed
    h = g_emb(refl, doy, cloud, **flags)
    for layer in g_layers:
        h = layer(h, **flags)
    return g_head(h, cloud, **flags)


def train(graphed, fp8, zones, accum=4):
    opt = torch.optim.AdamW([p for m in graphed for p in m.parameters()], lr=3e-4)
    for zone, micro_batches in zones:
        graphed[0].phenology_shift = ZONE_SHIFT_DAYS[zone]
        opt.zero_grad(set_to_none=False)
        for mb, (refl, doy, cloud, y) in enumerate(micro_batches):
            with te.autocast(enabled=True, recipe=fp8):  # CLEAN: TE autocast around the replays
                logits = forward(graphed, refl, doy, cloud, is_first_microbatch=(mb == 0))  # CLEAN: flag passed to every replay
            (F.cross_entropy(logits.float(), y) / accum).backward()
        opt.step()


@torch.no_grad()
def validate(graphed, fp8, batches):
    """Held-out parcels; the modules stay in training mode so the graphs replay."""
    hits = total = 0
    for refl, doy, cloud, y in batches:
        with te.autocast(enabled=True, recipe=fp8):
            logits = forward(graphed, refl, doy, cloud)  # HAZARD: api-misuse
        hits += (logits.argmax(-1) == y).sum().item()  # CLEAN: host read outside the graphed callables
        total += y.numel()
    return hits / total


if __name__ == "__main__":
    dev = "cuda"
    graphed, fp8 = build(device=dev)

    def batch():
        cloud = torch.rand(64, T, device=dev) > 0.7
        doy = (torch.arange(T, device=dev).float() * 10).expand(64, T).contiguous()
        return torch.rand(64, T, BANDS, device=dev), doy, cloud, torch.randint(0, N_CROPS, (64,), device=dev)

    zones = [(z, [batch() for _ in range(4)]) for z in ZONE_SHIFT_DAYS for _ in range(25)]
    train(graphed, fp8, zones)
    print("OA:", validate(graphed, fp8, [batch() for _ in range(10)]))
