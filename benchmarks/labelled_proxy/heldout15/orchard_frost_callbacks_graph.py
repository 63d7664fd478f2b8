"""Radiative-frost forecaster for apple orchards (10/50/90 % quantiles of the minimum
canopy temperature, next 12 h). The trainer captures the step and its callbacks as one graph.
"""
import time

import torch
import torch.nn as nn

N_FEAT, HIST, HORIZON, BATCH = 9, 24, 12, 512
QUANTILES = (0.1, 0.5, 0.9)


class FrostNet(nn.Module):
    def __init__(self, hidden=128):
        super().__init__()
        self.gru = nn.GRU(N_FEAT, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, HORIZON * len(QUANTILES))

    def forward(self, x):
        y, _ = self.gru(x)
        return self.head(y[:, -1]).view(-1, HORIZON, len(QUANTILES))


class ConsoleLogger:
    def on_step_end(self, trainer, loss):
        trainer.history.append(loss.item())  # HAZARD: host-sync


class StepTimer:
    def __init__(self):
        self.last = time.perf_counter()

    def on_step_end(self, trainer, loss):
        now = time.perf_counter()  # HAZARD: host-code
        trainer.step_times.append(now - self.last)
        self.last = now


class EMAWeights:
    def __init__(self, model, decay=0.999):
        self.shadow = [p.detach().clone() for p in model.parameters()]
        self.decay = decay

    def on_step_end(self, trainer, loss):
        for s, p in zip(self.shadow, trainer.model.parameters()):
            s.lerp_(p.detach(), 1.0 - self.decay)  # CLEAN: in-place EMA on the capture stream


class WeightMirror:
    """Keeps a copy of the weights for the nightly forecast job."""

    def __init__(self, model):
        self.buf = [torch.empty_like(p) for p in model.parameters()]
        self.stream = torch.cuda.Stream()

    def on_step_end(self, trainer, loss):
        with torch.cuda.stream(self.stream):  # HAZARD: stream
            for b, p in zip(self.buf, trainer.model.parameters()):
                b.copy_(p.detach())


class DeviceStepCounter:
    def __init__(self):
        self.steps = torch.zeros((), device="cuda")

    def on_step_end(self, trainer, loss):
        self.steps.add_(1)  # CLEAN: device-side counter, advances on every replay


class GraphTrainer:
    def __init__(self, model, callbacks=None, lr=1e-3):
        self.model = model.cuda()
        self.callbacks = callbacks if callbacks is not None else [
            ConsoleLogger(), StepTimer(), EMAWeights(self.model), WeightMirror(self.model), DeviceStepCounter()]
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=1e-4)
        self.q = torch.tensor(QUANTILES, device="cuda").view(1, 1, -1)  # CLEAN: built in __init__, outside the capture
        self.x = torch.zeros(BATCH, HIST, N_FEAT, device="cuda")
        self.y = torch.zeros(BATCH, HORIZON, 1, device="cuda")
        self.history, self.step_times = [], []

    def _step(self):
        self.opt.zero_grad(set_to_none=False)
        err = self.y - self.model(self.x)
        loss = torch.maximum(self.q * err, (self.q - 1) * err).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)  # CLEAN: clip_grad_norm_ is capturable
        self.opt.step()  # HAZARD: optimizer
        for cb in self.callbacks:
            cb.on_step_end(self, loss.detach())
        return loss.detach()

    def fit(self, loader, epochs=50):
        x0, y0 = next(iter(loader))
        self.x.copy_(x0), self.y.copy_(y0.unsqueeze(-1))
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            self._step()
        for _ in range(epochs):
            for xb, yb in loader:
                self.x.copy_(xb, non_blocking=True)
                self.y.copy_(yb.unsqueeze(-1), non_blocking=True)
                g.replay()
