"""Financial-crime platform: AML alert triage model (ranks transaction-monitoring alerts for
investigators).  GraphTrainer captures the whole step and fires the eager trainer's callbacks inside it.
"""
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Callback:
    def on_after_backward(self, trainer): ...
    def on_step_end(self, trainer, loss): ...
    def on_epoch_end(self, trainer, epoch): ...


class GradNormMonitor(Callback):
    def __init__(self, max_norm=5.0):
        self.max_norm, self.history = max_norm, []  # history feeds the divergence alarm

    def on_after_backward(self, trainer):
        total = torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), self.max_norm)  # CLEAN: clipping stays on the device
        self.history.append(float(total))  # HAZARD: host-sync


class ThroughputLogger(Callback):
    def __init__(self):
        self.t_last, self.rates = time.perf_counter(), []

    def on_step_end(self, trainer, loss):
        now = time.perf_counter()  # HAZARD: host-code
        self.rates.append(trainer.batch_size / max(now - self.t_last, 1e-9))
        self.t_last = now


class LossMirror(Callback):  # copies the loss to pinned memory for the experiment tracker
    def __init__(self):
        self.side = torch.cuda.Stream()
        self.host = torch.zeros(1, pin_memory=True)

    def on_step_end(self, trainer, loss):
        with torch.cuda.stream(self.side):  # HAZARD: stream
            self.host.copy_(loss.detach().view(1), non_blocking=True)


class WarmupCosine(Callback):
    def __init__(self, base_lr, warmup, total):
        self.base_lr, self.warmup, self.total = base_lr, warmup, total

    def on_epoch_end(self, trainer, epoch):
        lr = self.base_lr * min(1.0, (epoch + 1) / self.warmup) * 0.5 * (1 + math.cos(math.pi * epoch / self.total))
        for g in trainer.opt.param_groups:
            g["lr"] = lr  # HAZARD: optimizer


class AlertScorer(nn.Module):
    def __init__(self, n_feat=64, hid=128):
        super().__init__()
        self.txn, self.tab = nn.GRU(16, hid, batch_first=True), nn.Linear(n_feat, hid)
        self.out = nn.Linear(2 * hid, 1)

    def forward(self, feats, txns):
        return self.out(torch.cat([F.relu(self.tab(feats)), self.txn(txns)[1][-1]], -1)).squeeze(-1)


class GraphTrainer:
    def __init__(self, model, callbacks, batch_size=1024, n_feat=64, n_txn=50):
        self.model, self.callbacks, self.batch_size = model.cuda(), callbacks, batch_size
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, capturable=True)  # CLEAN: capturable AdamW stepped inside the graph
        self.ema = [p.detach().clone() for p in self.model.parameters()]
        self.x = torch.zeros(batch_size, n_feat, device="cuda")
        self.t = torch.zeros(batch_size, n_txn, 16, device="cuda")
        self.y = torch.zeros(batch_size, device="cuda")

    def _fire(self, hook, *args):
        for cb in self.callbacks:
            getattr(cb, hook)(self, *args)

    def _step(self):
        loss = F.binary_cross_entropy_with_logits(self.model(self.x, self.t), self.y)
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self._fire("on_after_backward")
        self.opt.step()
        with torch.no_grad():
            torch._foreach_lerp_(self.ema, list(self.model.parameters()), 0.01)  # CLEAN: in-place EMA of persistent tensors
        self._fire("on_step_end", loss)
        return loss.detach()

    def capture(self, warmup=3):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(warmup):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_loss = self._step()

    def fit(self, loader, epochs):
        self.capture()
        for epoch in range(epochs):
            for batch in loader:
                for dst, src in zip((self.x, self.t, self.y), batch):
                    dst.copy_(src)
                self.graph.replay()
            self._fire("on_epoch_end", epoch)

