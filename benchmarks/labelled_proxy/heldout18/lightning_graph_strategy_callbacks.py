"""Minimal Lightning-style trainer with a CUDA-graph training strategy.

`GraphedFit` captures the whole training step of a LightningModule-like object
(forward, backward, callbacks, optimizer step) once and replays it for every batch.
Callbacks use the usual hook names and therefore fire *inside* the captured step.
"""
import math
import time

import torch
import torch.nn as nn


class Callback:
    def on_before_optimizer_step(self, trainer, module, optimizer): ...
    def on_train_batch_end(self, trainer, module, outputs, batch_idx): ...
    def on_train_epoch_end(self, trainer, module): ...


class GradNormMonitor(Callback):
    def on_before_optimizer_step(self, trainer, module, optimizer):
        norm = torch.nn.utils.clip_grad_norm_(module.parameters(), trainer.gradient_clip_val)  # CLEAN: no host sync in clip_grad_norm_
        trainer.logged["grad_norm"] = norm.item()  # HAZARD: host-sync


class ThroughputMonitor(Callback):
    def __init__(self):
        self.t_last = None

    def on_train_batch_end(self, trainer, module, outputs, batch_idx):
        now = time.perf_counter()  # HAZARD: host-code
        if self.t_last is not None:
            trainer.logged["samples_per_s"] = trainer.batch_size / (now - self.t_last)
        self.t_last = now


class AsyncLossCopy(Callback):
    def __init__(self):
        self.stream = torch.cuda.Stream()

    def on_train_batch_end(self, trainer, module, outputs, batch_idx):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):  # HAZARD: stream
            trainer.loss_buffer.copy_(outputs["loss"].detach())


class WeightEMA(Callback):
    def __init__(self, module, decay=0.999):
        self.shadow = [p.detach().clone() for p in module.parameters()]
        self.decay = decay

    def on_train_batch_end(self, trainer, module, outputs, batch_idx):
        for e, p in zip(self.shadow, module.parameters()):
            e.lerp_(p.detach(), 1.0 - self.decay)  # CLEAN: lerp_ with a constant weight


class CosineAnnealing(Callback):
    def on_train_epoch_end(self, trainer, module):
        frac = trainer.current_epoch / max(trainer.max_epochs - 1, 1)
        for group in trainer.optimizer.param_groups:
            group["lr"] = trainer.base_lr * 0.5 * (1.0 + math.cos(math.pi * frac))  # HAZARD: optimizer


class GraphedFit:
    def __init__(self, module: nn.Module, callbacks, max_epochs=10, base_lr=1e-3, gradient_clip_val=1.0):
        self.module, self.callbacks = module.cuda(), callbacks
        self.max_epochs, self.base_lr, self.gradient_clip_val = max_epochs, base_lr, gradient_clip_val
        self.optimizer = torch.optim.AdamW(module.parameters(), lr=base_lr, capturable=True)  # CLEAN: capturable AdamW
        self.loss_buffer = torch.zeros((), device="cuda")
        self.logged, self.current_epoch = {}, 0

    def _fire(self, hook, *args):
        for cb in self.callbacks:
            getattr(cb, hook)(self, self.module, *args)

    def _step(self, batch_idx=0):
        self.optimizer.zero_grad(set_to_none=True)
        outputs = self.module.training_step((self.static_x, self.static_y), batch_idx)
        outputs["loss"].backward()
        self._fire("on_before_optimizer_step", self.optimizer)
        self.optimizer.step()
        self._fire("on_train_batch_end", outputs, batch_idx)
        return outputs["loss"].detach()

    def fit(self, loader):
        x0, y0 = next(iter(loader))
        self.batch_size = x0.size(0)
        self.static_x, self.static_y = x0.cuda(), y0.cuda()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for i in range(3):
                self._step(i)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.static_loss = self._step()
        for self.current_epoch in range(self.max_epochs):
            for x, y in loader:
                self.static_x.copy_(x, non_blocking=True)  # CLEAN: copy_ into the static batch
                self.static_y.copy_(y, non_blocking=True)
                graph.replay()
            self._fire("on_train_epoch_end")
            print(f"epoch {self.current_epoch}: loss {self.loss_buffer.item():.4f}")
