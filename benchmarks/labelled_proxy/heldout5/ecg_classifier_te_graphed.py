"""12-lead ECG multi-label classifier: conv stem + Transformer Engine encoder, FP8, TE CUDA graphs."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

N_CLASSES, DIM, N_LAYERS = 27, 256, 6


class LeadDropout(nn.Module):
    """Drops whole leads during training (robustness to missing electrodes)."""

    def __init__(self, p=0.1, seed=7):
        super().__init__()
        self.p = p
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(seed)

    def forward(self, x):  # (B, 12, T)
        keep = torch.rand(x.shape[0], x.shape[1], 1, device=x.device, generator=self.gen) > self.p  # HAZARD: rng
        return x * keep / (1 - self.p)


class ECGStem(nn.Module):
    def __init__(self, hp_taps, notch_taps, dim=DIM):
        super().__init__()
        self.hp_taps = hp_taps  # float32 numpy FIR taps, baseline-wander high-pass
        self.register_buffer("notch", torch.from_numpy(notch_taps).view(1, 1, -1).repeat(12, 1, 1))
        self.lead_drop = LeadDropout()
        self.conv = nn.Sequential(nn.Conv1d(12, dim, 15, stride=4, padding=7), nn.GELU(),
                                  nn.Conv1d(dim, dim, 7, stride=2, padding=3), nn.GELU())

    def forward(self, x):  # (B, 12, 5000) at 500 Hz
        taps = torch.from_numpy(self.hp_taps).to(x.device)  # HAZARD: pinned-memory
        x = F.conv1d(x, taps.view(1, 1, -1).expand(12, 1, -1), padding=taps.numel() // 2, groups=12)
        x = F.conv1d(x, self.notch, padding=self.notch.shape[-1] // 2, groups=12)  # CLEAN: notch taps kept in a registered CUDA buffer
        x = self.lead_drop(x)
        return self.conv(x).permute(2, 0, 1).contiguous().to(torch.bfloat16)  # (S, B, D)


def log_input_rms(module, args):
    module.last_rms = args[0].float().pow(2).mean().sqrt().detach()


def build(batch=64, T=5000, device="cuda"):
    stem = ECGStem(np.load("hp_fir.npy").astype(np.float32), np.load("notch50_fir.npy").astype(np.float32)).to(device)
    layers = [te.TransformerLayer(DIM, 4 * DIM, 8, hidden_dropout=0.1, attention_dropout=0.1,
                                  self_attn_mask_type="no_mask", params_dtype=torch.bfloat16).to(device)
              for _ in range(N_LAYERS)]
    for layer in layers:
        layer.register_forward_pre_hook(log_input_rms)  # HAZARD: api-misuse
    head = nn.Linear(DIM, N_CLASSES).to(device)
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
    seq = T // 8
    ecg = torch.randn(batch, 12, T, device=device)
    h = [(torch.randn(seq, batch, DIM, device=device, dtype=torch.bfloat16, requires_grad=True),) for _ in layers]
    with torch.amp.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        graphed = te.make_graphed_callables((stem, *layers), ((ecg,), *h), num_warmup_iters=3,
                                            enabled=True, recipe=recipe, cache_quantized_params=False)
    return graphed[0], list(graphed[1:]), head, recipe


def train(loader, epochs=30):
    stem, blocks, head, recipe = build()
    stem.register_forward_hook(lambda m, i, o: None)  # CLEAN: hook registered after graphing
    params = list(stem.parameters()) + [p for b in blocks for p in b.parameters()] + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.05)
    for epoch in range(epochs):
        for ecg, labels in loader:  # drop_last=True, fixed batch of 64
            ecg, labels = ecg.cuda(non_blocking=True), labels.cuda(non_blocking=True)
            with te.autocast(enabled=True, recipe=recipe):  # CLEAN: TE autocast with the capture recipe at replay
                h = stem(ecg)
                for blk in blocks:
                    h = blk(h)
            logits = head(h.float().mean(0))
            loss = F.binary_cross_entropy_with_logits(logits, labels.float())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")  # CLEAN: .item() outside the graphed callables
