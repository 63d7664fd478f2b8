"""Apnea/hypopnea event detection from overnight oximetry (SpO2 + pulse rate at 1 Hz): a dilated
1D CNN labels every second of a 15-minute window. Trainer from the sleep-lab repo; `capture()`
graphs the whole step and fires the callbacks inside it, like the eager trainer did."""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

WIN = 900   # 15-minute windows


class OxiNet(nn.Module):
    def __init__(self, ch=64):
        super().__init__()
        self.enc = nn.Sequential(
            nn.Conv1d(2, ch, 9, padding=4), nn.BatchNorm1d(ch), nn.ReLU(),
            nn.Conv1d(ch, ch, 9, padding=8, dilation=2), nn.BatchNorm1d(ch), nn.ReLU(),
            nn.Conv1d(ch, ch, 9, padding=16, dilation=4), nn.BatchNorm1d(ch), nn.ReLU())
        self.head = nn.Conv1d(ch, 1, 1)

    def forward(self, x):                      # (B, 2, WIN) -> logits (B, WIN)
        return self.head(self.enc(x)).squeeze(1)


class Callback:
    def on_after_backward(self, trainer): ...
    def on_step_end(self, trainer): ...


class GradNormLogger(Callback):
    def __init__(self):
        self.norms = []

    def on_after_backward(self, trainer):
        total = torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), 5.0)  # CLEAN: clip_grad_norm_ is capturable
        self.norms.append(float(total))  # HAZARD: host-sync


class ThroughputMeter(Callback):
    def __init__(self):
        self.stamps = []

    def on_step_end(self, trainer):
        self.stamps.append(time.perf_counter())  # HAZARD: host-code


class EMA(Callback):
    def __init__(self, model, decay=0.999):
        self.params, self.decay = list(model.parameters()), decay
        self.shadow = [p.detach().clone() for p in self.params]

    def on_step_end(self, trainer):
        torch._foreach_lerp_(self.shadow, [p.detach() for p in self.params], 1 - self.decay)  # CLEAN: device-side EMA, replayed every step


class Trainer:
    def __init__(self, model, callbacks, batch=128, total_steps=15_000):
        self.model = model.cuda()
        self.callbacks = callbacks
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=1e-2, capturable=True)
        self.sched = torch.optim.lr_scheduler.OneCycleLR(self.opt, max_lr=3e-3, total_steps=total_steps)
        self.x, self.y = torch.zeros(batch, 2, WIN, device="cuda"), torch.zeros(batch, WIN, device="cuda")
        self.pos_weight = torch.tensor(4.0, device="cuda")  # CLEAN: created once in __init__, outside the graph
        self.loss = torch.zeros((), device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    def _fire(self, hook):
        for cb in self.callbacks:
            getattr(cb, hook)(self)

    def _step(self):
        logits = self.model(self.x)
        loss = F.binary_cross_entropy_with_logits(logits, self.y, pos_weight=self.pos_weight)
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self._fire("on_after_backward")
        self.opt.step()  # CLEAN: AdamW built with capturable=True
        self.loss.copy_(loss.detach())
        self._fire("on_step_end")

    @torch.autocast("cuda", dtype=torch.bfloat16)  # HAZARD: autocast-cache
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self._step()

    def fit(self, loader, epochs=30):
        self.capture()
        for ep in range(epochs):
            for x, y in loader:                         # 500 batches of 128 windows, drop_last=True
                self.x.copy_(x, non_blocking=True)
                self.y.copy_(y, non_blocking=True)
                self.graph.replay()
                self.sched.step()  # HAZARD: optimizer
            print(f"epoch {ep}: loss {self.loss.item():.4f}")  # CLEAN: read between replays


if __name__ == "__main__":
    from oximetry_data import shhs_windows

    net = OxiNet().cuda()
    tr = Trainer(net, [GradNormLogger(), ThroughputMeter(), EMA(net)])
    tr.fit(shhs_windows("shhs1", win=WIN, batch=128, drop_last=True))
