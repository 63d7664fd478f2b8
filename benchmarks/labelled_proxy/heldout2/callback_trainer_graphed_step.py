"""Mini trainer: the training step (with its callbacks) is captured once and replayed."""
import logging
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("trainer")


class Callback:
    def on_capture(self, trainer): ...
    def on_step_end(self, trainer, loss): ...
    def on_step_begin(self, trainer, step): ...


class LossEMA(Callback):
    def __init__(self):
        self.ema = 0.0
        self.ema_dev = torch.zeros((), device="cuda")

    def on_capture(self, trainer):
        self.ema_dev.zero_()

    def on_step_end(self, trainer, loss):
        self.ema_dev.mul_(0.98).add_(0.02 * loss.detach())  # CLEAN: running average kept on the device
        self.ema = 0.98 * self.ema + 0.02 * float(loss)  # HAZARD: host-sync


class Throughput(Callback):
    def on_step_end(self, trainer, loss):
        trainer.last_step_time = time.time()  # HAZARD: host-code


class LinearWarmup(Callback):
    def __init__(self, warmup=1000, peak=5e-4):
        self.warmup, self.peak = warmup, peak

    def on_step_begin(self, trainer, step):
        for group in trainer.opt.param_groups:
            group["lr"] = self.peak * min(1.0, (step + 1) / self.warmup)  # HAZARD: optimizer


class Trainer:
    def __init__(self, model, callbacks, batch_shape=(64, 3, 224, 224)):
        self.model = model.cuda()
        self.opt = torch.optim.AdamW(model.parameters(), lr=5e-4, fused=True)
        self.callbacks = callbacks
        self.x = torch.empty(batch_shape, device="cuda")
        self.y = torch.empty(batch_shape[0], dtype=torch.long, device="cuda")
        self.graph = None
        self.last_step_time = 0.0

    def _train_step(self):
        self.opt.zero_grad(set_to_none=False)  # CLEAN: grads zeroed in place, addresses stay fixed
        with torch.autocast("cuda", dtype=torch.bfloat16):  # CLEAN: autocast entered inside the captured region
            loss = F.cross_entropy(self.model(self.x), self.y)
        loss.backward()
        self.opt.step()  # HAZARD: optimizer
        for cb in self.callbacks:
            cb.on_step_end(self, loss)
        return loss

    def _capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._train_step()
        torch.cuda.current_stream().wait_stream(s)
        for cb in self.callbacks:
            cb.on_capture(self)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            log.info("capturing the training step")  # CLEAN: plain string logged once at capture
            self.static_loss = self._train_step()

    def fit(self, loader):
        for step, (x, y) in enumerate(loader):
            for cb in self.callbacks:
                cb.on_step_begin(self, step)
            self.x.copy_(x, non_blocking=True)
            self.y.copy_(y, non_blocking=True)
            if self.graph is None:
                self._capture()
            self.graph.replay()


def main(model: nn.Module, loader):
    Trainer(model, [LossEMA(), Throughput(), LinearWarmup()]).fit(loader)
