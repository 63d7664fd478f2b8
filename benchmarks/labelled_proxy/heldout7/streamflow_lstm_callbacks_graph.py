"""Rainfall-runoff LSTM for CAMELS-style basins, trained with a captured step.

Inputs are 365 days of meteorological forcings plus static catchment attributes; the
target is next-day discharge, trained with the basin-normalised NSE* loss. The
trainer captures its whole step and fires callbacks at the end of the step.
"""
import time

import torch
import torch.nn as nn

SEQ, N_FORCING, N_STATIC = 365, 5, 27


class RunoffLSTM(nn.Module):
    def __init__(self, hidden=256):
        super().__init__()
        self.lstm = nn.LSTM(N_FORCING + N_STATIC, hidden, batch_first=True)
        self.drop, self.head = nn.Dropout(0.4), nn.Linear(hidden, 1)

    def forward(self, x):
        h, _ = self.lstm(x)
        return self.head(self.drop(h[:, -1])).squeeze(-1)


def nse_star(pred, obs, basin_std, eps=0.1):
    valid = ~torch.isnan(obs)
    err = torch.where(valid, pred - torch.nan_to_num(obs), torch.zeros_like(pred))  # CLEAN: missing discharge masked with where
    return (err.pow(2) / (basin_std + eps).pow(2)).sum() / valid.sum().clamp_min(1)


class Callback:
    def on_step_end(self, trainer, loss, pred, obs): ...


class NSELogger(Callback):
    def on_step_end(self, trainer, loss, pred, obs):
        o = torch.nan_to_num(obs, nan=0.0)
        nse = 1 - (pred - o).pow(2).sum() / (o - o.mean()).pow(2).sum().clamp_min(1e-6)
        trainer.history.append(nse.item())  # HAZARD: host-sync


class StepTimer(Callback):
    last = 0.0

    def on_step_end(self, trainer, *args):
        now = time.time()  # HAZARD: host-code
        trainer.step_seconds.append(now - self.last)
        self.last = now


class WeightEMA(Callback):
    def __init__(self, model, decay=0.999):
        self.decay = decay
        self.shadow = [p.detach().clone() for p in model.parameters()]

    def on_step_end(self, trainer, *args):
        with torch.no_grad():
            for s, p in zip(self.shadow, trainer.model.parameters()):
                s.lerp_(p, 1 - self.decay)  # CLEAN: in-place device update of the shadow weights


class AsyncCheckpoint(Callback):
    def __init__(self, model):
        self.stream = torch.cuda.Stream()
        self.host = [torch.empty(p.shape, dtype=p.dtype).pin_memory() for p in model.parameters()]

    def on_step_end(self, trainer, *args):
        with torch.cuda.stream(self.stream):  # HAZARD: stream
            for h, p in zip(self.host, trainer.model.parameters()):
                h.copy_(p.detach(), non_blocking=True)


class GraphedTrainer:
    def __init__(self, model, callbacks, batch=256, lr=1e-3, device="cuda"):
        self.model = model.to(device)
        self.callbacks = callbacks
        self.opt = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.static_x = torch.zeros(batch, SEQ, N_FORCING + N_STATIC, device=device)
        self.static_y, self.static_std = torch.zeros(batch, device=device), torch.ones(batch, device=device)
        self.step_count = torch.zeros((), dtype=torch.long, device=device)
        self.history, self.step_seconds = [], []
        self.graph = torch.cuda.CUDAGraph()

    def _step(self):
        pred = self.model(self.static_x)
        loss = nse_star(pred, self.static_y, self.static_std)
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)  # CLEAN: no error_if_nonfinite, no host sync
        self.opt.step()  # HAZARD: optimizer
        self.step_count += 1  # CLEAN: device-side step counter
        for cb in self.callbacks:
            cb.on_step_end(self, loss.detach(), pred.detach(), self.static_y)
        return loss.detach()

    def fit(self, loader, epochs=30):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self.static_loss = self._step()
        for _ in range(epochs):
            for batch in loader:
                for dst, src in zip((self.static_x, self.static_y, self.static_std), batch):
                    dst.copy_(src, non_blocking=True)
                self.graph.replay()
