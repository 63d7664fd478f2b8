"""Fault diagnosis for the Tennessee Eastman benchmark process (52 measured and
manipulated variables, 21 faults + normal) with a dilated temporal conv net. The
trainer captures its whole step and fires callbacks from inside the step.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

N_VARS, WIN, N_CLASSES = 52, 64, 22


class TCN(nn.Module):
    def __init__(self, c=64):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(N_VARS, c, 3, padding=1, dilation=1), nn.ReLU(),
            nn.Conv1d(c, c, 3, padding=2, dilation=2), nn.ReLU(),
            nn.Conv1d(c, c, 3, padding=4, dilation=4), nn.ReLU(),
            nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(c, N_CLASSES),
        )

    def forward(self, x):
        return self.net(x)


class Callback:
    def on_step_end(self, trainer, loss):
        pass


class ConsoleLogger(Callback):
    def __init__(self):
        self.t0 = time.perf_counter()
        self.history = []

    def on_step_end(self, trainer, loss):
        self.history.append(loss.item())  # HAZARD: host-sync
        trainer.wall_s = time.perf_counter() - self.t0  # HAZARD: host-code


class EMAWeights(Callback):
    def __init__(self, model, decay=0.999):
        self.shadow = [p.detach().clone() for p in model.parameters()]
        self.decay = decay

    def on_step_end(self, trainer, loss):
        with torch.no_grad():
            for s, p in zip(self.shadow, trainer.model.parameters()):
                s.lerp_(p, 1 - self.decay)  # CLEAN: in-place EMA on device tensors


class CheckpointMirror(Callback):
    def __init__(self, model):
        self.stream = torch.cuda.Stream()
        self.copy = [torch.empty_like(p) for p in model.parameters()]

    def on_step_end(self, trainer, loss):
        with torch.cuda.stream(self.stream):  # HAZARD: stream
            for c, p in zip(self.copy, trainer.model.parameters()):
                c.copy_(p.detach())


class Trainer:
    def __init__(self, model, callbacks, batch=128, device="cuda"):
        self.model = model.to(device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=1e-4)
        self.callbacks = callbacks(self.model)
        self.x = torch.zeros(batch, N_VARS, WIN, device=device)
        self.y = torch.zeros(batch, dtype=torch.long, device=device)
        self.steps = torch.zeros((), device=device)
        self.graph = torch.cuda.CUDAGraph()

    def _step(self):
        self.opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(self.model(self.x), self.y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)  # CLEAN: capturable after warm-up
        self.opt.step()  # HAZARD: optimizer
        self.steps += 1  # CLEAN: device-side step counter, updated in place
        for cb in self.callbacks:
            cb.on_step_end(self, loss.detach())
        return loss

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self.loss = self._step()

    def fit(self, loader, epochs=10):
        self.capture()
        for epoch in range(epochs):
            for x, y in loader:
                self.x.copy_(x)
                self.y.copy_(y)
                self.graph.replay()
            print(f"epoch {epoch} loss {self.loss.item():.4f} steps {int(self.steps)}")  # CLEAN: host read after the replays, outside capture


if __name__ == "__main__":
    loader = [(torch.randn(128, N_VARS, WIN, device="cuda"), torch.randint(0, N_CLASSES, (128,), device="cuda"))
              for _ in range(40)]
    make_callbacks = lambda m: [ConsoleLogger(), EMAWeights(m), CheckpointMirror(m)]
    Trainer(TCN(), make_callbacks).fit(loader)
