"""Speech-to-text translation (fairseq S2T-style conv subsampler + Transformer encoder) with the encoder on
Transformer Engine layers, graphed with TE make_graphed_callables (FP8, cached quantized weights). The
config is a dataclass; the decoder stays eager."""
import random
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

@dataclass
class S2TConfig:
    n_mels: int = 80
    d_model: int = 512
    ffn: int = 2048
    heads: int = 8
    layers: int = 6
    max_frames: int = 1024
    batch: int = 16
    tgt_vocab: int = 8000
    specaug_width: int = 40
    feat_noise: float = 0.01
    seed: int = 1

class Conv1dSubsampler(nn.Module):
    def __init__(self, cfg: S2TConfig):
        super().__init__()
        self.cfg = cfg
        self.conv = nn.Sequential(nn.Conv1d(cfg.n_mels, cfg.d_model, 5, 2, 2), nn.GELU(),
                                  nn.Conv1d(cfg.d_model, cfg.d_model, 5, 2, 2), nn.GELU())
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(cfg.seed)

    def forward(self, fbank):
        if self.training:
            t0 = random.randint(0, fbank.shape[1] - self.cfg.specaug_width)  # HAZARD: host-code
            span = torch.arange(t0, t0 + self.cfg.specaug_width, device=fbank.device)
            fbank = fbank.index_fill(1, span, 0.0)
            noise = torch.randn(fbank.shape, device=fbank.device, generator=self.gen)  # HAZARD: rng
            fbank = fbank + self.cfg.feat_noise * noise
        return self.conv(fbank.transpose(1, 2)).permute(2, 0, 1)

def build_encoder(cfg):
    sub = Conv1dSubsampler(cfg).cuda()
    layers = [te.TransformerLayer(cfg.d_model, cfg.ffn, cfg.heads, hidden_dropout=0.0, attention_dropout=0.0,
                                  self_attn_mask_type="padding").cuda() for _ in range(cfg.layers)]
    return sub, layers

def graph_encoder(cfg, sub, layers):
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
    T = cfg.max_frames // 4
    fbank = torch.randn(cfg.batch, cfg.max_frames, cfg.n_mels, device="cuda")
    mask = torch.zeros(cfg.batch, 1, 1, T, dtype=torch.bool, device="cuda")
    hidden = [torch.randn(T, cfg.batch, cfg.d_model, device="cuda", requires_grad=True) for _ in layers]
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        g_sub = te.make_graphed_callables(sub, (fbank,), enabled=False)
        g_layers = te.make_graphed_callables(tuple(layers), tuple((h,) for h in hidden),
                                             sample_kwargs=tuple({"attention_mask": mask} for _ in layers),
                                             enabled=True, recipe=recipe, cache_quantized_params=True)
    return g_sub, g_layers, recipe

class EagerDecoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.emb = nn.Embedding(cfg.tgt_vocab, cfg.d_model)
        self.dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(cfg.d_model, cfg.heads, cfg.ffn), 3)
        self.out = nn.Linear(cfg.d_model, cfg.tgt_vocab)

    def forward(self, memory, prev_tokens):
        return self.out(self.dec(self.emb(prev_tokens).transpose(0, 1), memory))

def train(cfg, loader, val_loader, steps=1000):
    sub, layers = build_encoder(cfg)
    decoder = EagerDecoder(cfg).cuda()
    g_sub, g_layers, recipe = graph_encoder(cfg, sub, layers)
    params = list(sub.parameters()) + [p for l in layers for p in l.parameters()] + list(decoder.parameters())
    opt = torch.optim.AdamW(params, lr=2e-3)
    for step, microbatches in zip(range(steps), loader):
        for micro, (fbank, mask, prev, tgt) in enumerate(microbatches):
            h = g_sub(fbank)
            with te.autocast(enabled=True, recipe=recipe):  # CLEAN: TE autocast around the replays
                for layer in g_layers:
                    h = layer(h, attention_mask=mask, is_first_microbatch=(micro == 0))  # CLEAN: declared keyword + flag
            logits = decoder(h.float(), prev)
            F.cross_entropy(logits.flatten(0, 1), tgt.t().flatten()).backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
    with torch.no_grad():
        for fbank, mask, prev, tgt in val_loader:
            h = g_sub(fbank)
            with te.autocast(enabled=True, recipe=recipe):
                for layer in g_layers:
                    h = layer(h, attention_mask=mask)  # HAZARD: api-misuse
            print("val loss", F.cross_entropy(decoder(h.float(), prev).flatten(0, 1), tgt.t().flatten()).item())  # CLEAN: eager read after the replays
