"""Sprite animation in-betweening for the 2D art team: given key frames A and C of a
64x64 pixel-art walk cycle, predict the middle frame B. Trainer written by a Keras
user: `fit()` with callback objects; the whole train step (including the callbacks it
fires) is captured as one CUDA graph after a short warm-up.
"""
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class InbetweenNet(nn.Module):
    def __init__(self, ch=64):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(8, ch, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(ch, ch, 3, padding=2, dilation=2), nn.ReLU(),
                                 nn.Conv2d(ch, ch, 3, padding=4, dilation=4), nn.ReLU(),
                                 nn.Conv2d(ch, 4, 3, padding=1))

    def forward(self, a, c):
        return torch.sigmoid(self.net(torch.cat([a, c], 1)))


class Callback:
    def on_train_batch_end(self, trainer, logs):
        pass


class PSNRLogger(Callback):
    def on_train_batch_end(self, trainer, logs):
        mse = F.mse_loss(logs["pred"], trainer.static_b)
        logs["psnr"] = (10 * torch.log10(1.0 / mse)).item()  # HAZARD: host-sync


class StepTimer(Callback):
    def __init__(self):
        self.stamps = []

    def on_train_batch_end(self, trainer, logs):
        self.stamps.append(time.perf_counter())  # HAZARD: host-code


class EMAWeights(Callback):
    def __init__(self, model, decay=0.999):
        self.shadow = [p.detach().clone() for p in model.parameters()]
        self.stream = torch.cuda.Stream()
        self.decay = decay

    def on_train_batch_end(self, trainer, logs):
        with torch.cuda.stream(self.stream):  # HAZARD: stream
            torch._foreach_lerp_(self.shadow, [p.detach() for p in trainer.model.parameters()], 1 - self.decay)


class PaletteJitter(Callback):
    def __init__(self, strength=0.03):
        self.jitter_np = np.zeros((1, 4, 1, 1), np.float32)
        self.strength = strength

    def on_train_batch_end(self, trainer, logs):
        shift = torch.from_numpy(self.jitter_np).cuda()  # HAZARD: pinned-memory
        trainer.static_a.add_(shift * self.strength)


class Trainer:
    def __init__(self, model, callbacks, batch=32, lr=2e-4):
        self.model = model.cuda()
        self.callbacks = callbacks
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=1e-4)
        self.static_a = torch.zeros(batch, 4, 64, 64, device="cuda")
        self.static_b = torch.zeros_like(self.static_a)
        self.static_c = torch.zeros_like(self.static_a)

    def train_step(self):
        pred = self.model(self.static_a, self.static_c)
        loss = F.l1_loss(pred, self.static_b) + 0.1 * F.mse_loss(pred[:, 3], self.static_b[:, 3])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)  # CLEAN: capturable grad clipping
        self.opt.step()  # HAZARD: optimizer
        self.opt.zero_grad(set_to_none=False)
        logs = {"loss": loss.detach(), "pred": pred.detach()}
        for cb in self.callbacks:
            cb.on_train_batch_end(self, logs)
        return logs["loss"]

    def fit(self, dataset, epochs=100):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.train_step()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):  # CLEAN: warmed up on a side stream first
            static_loss = self.train_step()
        history = []
        for epoch in range(epochs):
            for a, b, c in dataset:
                self.static_a.copy_(a)  # CLEAN: batches copied into the static inputs
                self.static_b.copy_(b)
                self.static_c.copy_(c)
                graph.replay()
            history.append(static_loss.item())  # CLEAN: eager read after the replays
        return history
