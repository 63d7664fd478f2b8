"""Spend forecaster behind the budget-pacing service of an ad server.

From the last 48 hourly buckets of a campaign (impressions, spend, win rate,
bid multiplier) a GRU forecasts P10/P50/P90 spend for the next 24 hours.  The
trainer captures forward, backward, optimizer and callbacks in one graph.
"""
import time

import torch
import torch.nn as nn

QUANTILES = (0.1, 0.5, 0.9)


class SpendForecaster(nn.Module):
    def __init__(self, n_in=12, h=128, horizon=24):
        super().__init__()
        self.gru = nn.GRU(n_in, h, num_layers=2, batch_first=True)
        self.head = nn.Linear(h, horizon * len(QUANTILES))
        self.horizon = horizon

    def forward(self, x):
        out, _ = self.gru(x)
        return self.head(out[:, -1]).view(-1, self.horizon, len(QUANTILES))


def pinball(pred, target, q):
    err = target.unsqueeze(-1) - pred
    return torch.maximum(q * err, (q - 1) * err).mean()


class Callback:
    def on_step_end(self, trainer, loss):
        pass


class EMAWeights(Callback):
    def __init__(self, model, decay=0.999):
        self.decay = decay
        self.shadow = [p.detach().clone() for p in model.parameters()]

    def on_step_end(self, trainer, loss):
        torch._foreach_lerp_(self.shadow, [p.detach() for p in trainer.model.parameters()], 1 - self.decay)  # CLEAN: device-side EMA


class ConsoleLogger(Callback):
    def on_step_end(self, trainer, loss):
        self.last_loss = float(loss)  # HAZARD: host-sync
        self.last_time = time.monotonic()  # HAZARD: host-code


class ForecastSnapshot(Callback):
    def __init__(self):
        self.stream = torch.cuda.Stream()
        self.snapshot = None

    def on_step_end(self, trainer, loss):
        with torch.cuda.stream(self.stream):  # HAZARD: stream
            self.snapshot = trainer.static_pred.detach()[:, :, 1].to(torch.float16)


class GraphTrainer:
    def __init__(self, model, callbacks, batch=1024, hist=48, horizon=24):
        self.model = model.cuda()
        self.callbacks = callbacks
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.static_x = torch.zeros(batch, hist, 12, device="cuda")
        self.static_y = torch.zeros(batch, horizon, device="cuda")
        self.steps = torch.zeros((), device="cuda")
        self.q = torch.tensor(QUANTILES, device="cuda")

    def _step(self):
        self.static_pred = self.model(self.static_x)
        loss = pinball(self.static_pred, self.static_y, self.q)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)  # CLEAN: clip_grad_norm_ without error_if_nonfinite is sync-free
        self.opt.step()  # HAZARD: optimizer
        self.steps.add_(1)  # CLEAN: device step counter
        for cb in self.callbacks:
            cb.on_step_end(self, loss)
        return loss.detach()

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.opt.zero_grad(set_to_none=True)
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        self.opt.zero_grad(set_to_none=True)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_loss = self._step()

    def fit(self, loader, epochs=5):
        self.capture()
        for _ in range(epochs):
            for x, y in loader:
                self.static_x.copy_(x)
                self.static_y.copy_(y)
                self.graph.replay()
        return self.static_loss.item()


if __name__ == "__main__":
    m = SpendForecaster()
    cbs = [EMAWeights(m), ConsoleLogger(), ForecastSnapshot()]
    data = [(torch.rand(1024, 48, 12, device="cuda"), torch.rand(1024, 24, device="cuda")) for _ in range(100)]
    print(GraphTrainer(m, cbs).fit(data))
