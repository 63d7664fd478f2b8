"""Soft sensor for injection moulding: part weight and short-shot risk from
cavity pressure / mould temperature curves. The whole training step (forward,
backward, clipping, AdamW) is captured once and replayed for every batch.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, CURVE = 256, 512


class CavityNet(nn.Module):
    def __init__(self, ch=64):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(2, ch, 9, stride=2, padding=4), nn.GELU(),
            nn.Conv1d(ch, ch, 9, stride=2, padding=4), nn.GELU(),
            nn.Conv1d(ch, ch, 9, stride=2, padding=4), nn.GELU(),
            nn.AdaptiveAvgPool1d(1),
        )
        self.weight_head = nn.Linear(ch, 1)
        self.short_head = nn.Linear(ch, 1)

    def forward(self, x):
        h = self.conv(x).flatten(1)
        return self.weight_head(h).squeeze(-1), self.short_head(h).squeeze(-1)


class StepTrainer:
    def __init__(self, model, lr=3e-4, epochs=40):
        self.model = model.cuda()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=1e-4, capturable=True)
        self.base_lr, self.epochs = lr, epochs
        self.cons_weight = 0.0
        self.x = torch.zeros(BATCH, 2, CURVE, device="cuda")
        self.w = torch.zeros(BATCH, device="cuda")
        self.short = torch.zeros(BATCH, device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    def _loss(self):
        gain = float(np.random.normal(1.0, 0.02))  # HAZARD: host-code
        x = self.x * gain
        w_hat, logit = self.model(x)
        mse = F.mse_loss(w_hat, self.w)
        bce = F.binary_cross_entropy_with_logits(logit, self.short)
        # heavier parts need more holding-pressure integral: penalise the opposite trend
        hold = x[:, 0, CURVE // 2:].mean(-1)
        cons = F.relu(-(w_hat - w_hat.mean()) * (hold - hold.mean())).mean()
        lam = self.cons_weight  # HAZARD: python-scalar
        return mse + bce + lam * cons

    def _step(self):
        self.opt.zero_grad(set_to_none=False)
        loss = self._loss()
        if not torch.isfinite(loss):  # HAZARD: dynamic-control-flow
            return loss.detach()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)  # CLEAN: clip_grad_norm_ is capturable
        self.opt.step()  # CLEAN: AdamW built with capturable=True
        return loss.detach()

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self.static_loss = self._step()

    def fit(self, loader):
        self.capture()
        for epoch in range(self.epochs):
            self.cons_weight = min(1.0, epoch / 10.0)
            for g in self.opt.param_groups:
                g["lr"] = 0.5 * self.base_lr * (1 + math.cos(math.pi * epoch / self.epochs))  # HAZARD: optimizer
            total = 0.0
            for xb, wb, sb in loader:
                self.x.copy_(xb, non_blocking=True)  # CLEAN: copy into the static input
                self.w.copy_(wb, non_blocking=True)
                self.short.copy_(sb, non_blocking=True)
                self.graph.replay()
                total += self.static_loss.item()  # CLEAN: host read after the replay
            print(f"epoch {epoch}: loss {total / len(loader):.4f}")
