"""Structural health monitoring of a cable-stayed bridge: strain / acceleration autoencoder.

The autoencoder is trained on the healthy baseline year; its reconstruction error is later
used as a damage index. The trainer captures one full training step (forward, backward,
optimizer) and lets callbacks hook into the end of every step.
"""
import time

import torch
import torch.nn as nn


class SensorAE(nn.Module):
    def __init__(self, n_ch=64, win=256, z=32):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv1d(n_ch, 128, 9, 4, 4), nn.GELU(), nn.Conv1d(128, 64, 9, 4, 4), nn.GELU(),
                                 nn.Flatten(), nn.Linear(64 * win // 16, z))
        self.dec = nn.Sequential(nn.Linear(z, 64 * win // 16), nn.Unflatten(1, (64, win // 16)),
                                 nn.ConvTranspose1d(64, 128, 4, 4), nn.GELU(), nn.ConvTranspose1d(128, n_ch, 4, 4))

    def forward(self, x):
        return self.dec(self.enc(x))


class Callback:
    def on_step_end(self, trainer, loss):
        pass


class ConsoleLogger(Callback):
    def __init__(self, every=50):
        self.every, self.t0 = every, time.perf_counter()

    def on_step_end(self, trainer, loss):
        now = time.perf_counter()  # HAZARD: host-code
        trainer.history.append((now - self.t0, loss.item()))  # HAZARD: host-sync


class EMAWeights(Callback):
    def __init__(self, model, decay=0.999):
        self.shadow = [p.detach().clone() for p in model.parameters()]
        self.decay = decay

    def on_step_end(self, trainer, loss):
        with torch.no_grad():
            for s, p in zip(self.shadow, trainer.model.parameters()):
                s.lerp_(p, 1.0 - self.decay)  # CLEAN: in-place EMA on persistent tensors


class CheckpointMirror(Callback):
    def __init__(self, model):
        self.stream = torch.cuda.Stream()
        self.mirror = [torch.empty_like(p, device="cpu").pin_memory() for p in model.parameters()]

    def on_step_end(self, trainer, loss):
        with torch.cuda.stream(self.stream):  # HAZARD: stream
            for m, p in zip(self.mirror, trainer.model.parameters()):
                m.copy_(p.detach(), non_blocking=True)


class GraphTrainer:
    def __init__(self, model, callbacks=(), batch=128, n_ch=64, win=256):
        self.model = model.cuda()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.callbacks = list(callbacks)
        self.history = []
        self.x = torch.zeros(batch, n_ch, win, device="cuda")
        self.step_t = torch.zeros((), device="cuda", dtype=torch.long)

    def _step(self):
        recon = self.model(self.x)
        loss = (recon - self.x).pow(2).mean()
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)  # CLEAN: clip_grad_norm_ is capturable
        self.opt.step()  # HAZARD: optimizer
        self.step_t += 1  # CLEAN: device-side step counter
        for cb in self.callbacks:
            cb.on_step_end(self, loss)
        return loss.detach()

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.loss = self._step()

    def fit(self, windows, epochs=5):
        self.capture()
        for _ in range(epochs):
            for w in windows:
                self.x.copy_(w, non_blocking=True)
                self.graph.replay()
        return float(self.loss)  # CLEAN: host read after the replays


if __name__ == "__main__":
    ae = SensorAE()
    trainer = GraphTrainer(ae, callbacks=[ConsoleLogger(), EMAWeights(ae), CheckpointMirror(ae)])
    data = [torch.randn(128, 64, 256, device="cuda") for _ in range(20)]
    print("final loss", trainer.fit(data))
