"""Language-model pretraining loop where the whole train step is compiled (max-autotune)."""
import logging
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("train")


class GPTBlock(nn.Module):
    def __init__(self, d=1024, h=16):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, h, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        a, _ = self.attn(self.ln1(x), self.ln1(x), self.ln1(x), need_weights=False, is_causal=False)
        x = x + a
        return x + self.mlp(self.ln2(x))


def train_step(model, batch, targets, lr_scale, state):
    logits = model(batch)
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    loss = loss * lr_scale  # HAZARD: python-scalar
    if loss > 1e4:  # HAZARD: dynamic-control-flow
        log.warning("loss spike at step %d", state["step"])  # HAZARD: host-code
    loss.backward()
    gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    state["step"] += 1  # HAZARD: host-code
    state["last_loss"] = loss.item()  # HAZARD: host-sync
    return loss, gnorm


def main(data, total_steps=10000, warmup=1000):
    model = nn.Sequential(nn.Embedding(50304, 1024), *[GPTBlock() for _ in range(4)], nn.Linear(1024, 50304)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, fused=True)
    step_fn = torch.compile(train_step, mode="max-autotune")
    state = {"step": 0, "last_loss": 0.0}
    for i, (x, y) in enumerate(data):
        lr_scale = min(1.0, (i + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * i / total_steps))
        loss, gnorm = step_fn(model, x.cuda(), y.cuda(), lr_scale, state)
        opt.step()  # CLEAN: optimizer runs eagerly, outside the compiled step
        opt.zero_grad(set_to_none=True)
        if i % 100 == 0:
            log.info("step %d loss %.3f gnorm %.2f", i, loss.item(), gnorm.item())
