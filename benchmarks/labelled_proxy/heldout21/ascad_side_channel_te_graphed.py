"""Profiled side-channel attack on ASCAD (AES, byte 2): a transformer over power traces
predicts Sbox(p ^ k); the key rank is tracked on the attack set after every epoch.

The TE layers are graphed with FP8 weight caching (`cache_quantized_params=True`); the
trace embedding and the classifier head are graphed in a second call.
"""
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

TRACE_LEN, STRIDE = 700, 7
N_TOK = TRACE_LEN // STRIDE
HID, HEADS, FFN, DEPTH, BATCH = 128, 4, 512, 4, 64


class TraceEmbed(nn.Module):
    def __init__(self, mu, sigma, max_desync=50):
        super().__init__()
        self.mu_cpu, self.sigma_cpu = mu, sigma        # per-sample stats of the profiling set (CPU)
        self.max_desync = max_desync
        self.clip = 8.0
        self.conv = nn.Conv1d(1, HID, STRIDE, stride=STRIDE)
        self.pos = nn.Parameter(torch.zeros(N_TOK, 1, HID))

    def forward(self, tr):                             # (B, 700)
        x = (tr - self.mu_cpu.cuda()) / self.sigma_cpu.cuda()  # HAZARD: pinned-memory
        if self.training:
            shift = random.randint(0, self.max_desync)  # HAZARD: host-code
            x = torch.roll(x, shifts=shift, dims=1)
        if x.abs().max() > self.clip:  # HAZARD: dynamic-control-flow
            x = x.clamp(-self.clip, self.clip)
        return self.conv(x[:, None]).permute(2, 0, 1) + self.pos


class SboxHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Sequential(nn.LayerNorm(HID), nn.Linear(HID, 256))

    def forward(self, tok):
        return self.fc(tok.mean(0))


def build(mu, sigma, device="cuda"):
    embed, head = TraceEmbed(mu, sigma).to(device), SboxHead().to(device)
    layers = [te.TransformerLayer(HID, FFN, HEADS, hidden_dropout=0.0, attention_dropout=0.0,
                                  self_attn_mask_type="no_mask").to(device) for _ in range(DEPTH)]
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=32)
    tok = [(torch.randn(N_TOK, BATCH, HID, device=device, requires_grad=True),) for _ in range(DEPTH)]
    g_layers = te.make_graphed_callables(tuple(layers), tuple(tok), enabled=True, recipe=recipe,
                                         cache_quantized_params=True)
    g_embed, g_head = te.make_graphed_callables(
        (embed, head), ((torch.randn(BATCH, TRACE_LEN, device=device),),
                        (torch.randn(N_TOK, BATCH, HID, device=device, requires_grad=True),)),
        enabled=True, recipe=recipe)
    return [embed, *layers, head], g_embed, g_layers, g_head, recipe


def forward(g_embed, g_layers, g_head, traces, first_mb=None):
    x = g_embed(traces)
    for lyr in g_layers:
        x = lyr(x, is_first_microbatch=first_mb) if first_mb is not None else lyr(x)  # HAZARD: api-misuse
    return g_head(x)


@torch.no_grad()
def key_rank(logp, plaintexts, true_key, sbox):
    # accumulate log-likelihood of every key guess over the attack traces (eager)
    guesses = torch.arange(256, device=logp.device)
    idx = sbox[plaintexts[:, None] ^ guesses[None, :]]
    scores = logp.gather(1, idx).sum(0)
    return int((scores > scores[true_key]).sum())  # CLEAN: eager, after the replays


def train(profiling, attack, mu, sigma, sbox, true_key, epochs=50, device="cuda"):
    modules, g_embed, g_layers, g_head, recipe = build(mu, sigma, device)
    opt = torch.optim.Adam([p for m in modules for p in m.parameters()], lr=1e-4)
    sbox = torch.as_tensor(sbox, device=device)  # CLEAN: uploaded once, before any replay
    for ep in range(epochs):
        for tr, label in profiling:                     # batches of 64, drop_last=True
            with te.autocast(enabled=True, recipe=recipe):  # CLEAN: TE autocast around the replays
                logits = forward(g_embed, g_layers, g_head, tr.to(device), first_mb=True)
            loss = F.cross_entropy(logits.float(), label.to(device))
            opt.zero_grad(set_to_none=False)
            loss.backward()
            opt.step()
        # attack phase: dropout is 0 everywhere, so no .eval() needed
        logp = []
        with torch.no_grad(), te.autocast(enabled=True, recipe=recipe):
            for tr, _ in attack:                        # batches of 64, drop_last=True
                logp.append(F.log_softmax(forward(g_embed, g_layers, g_head, tr.to(device)).float(), -1))
        logp = torch.cat(logp)
        pt = torch.as_tensor(attack.plaintexts[: logp.shape[0], 2], device=device).long()
        print(f"epoch {ep}: loss {loss.item():.3f} key rank {key_rank(logp, pt, true_key, sbox)}")


if __name__ == "__main__":
    from ascad_io import AES_SBOX, load_ascad

    prof, att, mu, sigma, key = load_ascad("ASCAD_desync50.h5", batch=BATCH)
    train(prof, att, torch.from_numpy(mu), torch.from_numpy(sigma), np.array(AES_SBOX), key[2])
