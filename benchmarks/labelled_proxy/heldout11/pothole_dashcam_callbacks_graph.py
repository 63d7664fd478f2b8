"""Pothole / crack segmentation from municipal dash-cam footage.

A Trainer captures the whole training step (forward, Dice+BCE loss, backward, optimizer)
in one CUDA graph; callbacks registered on the trainer fire at the end of the step, i.e.
inside the capture.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RoadSegNet(nn.Module):
    def __init__(self, c=32):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, c, 3, 2, 1), nn.ReLU(), nn.Conv2d(c, 2 * c, 3, 2, 1), nn.ReLU(),
                                 nn.Conv2d(2 * c, 4 * c, 3, 2, 1), nn.ReLU())
        self.dec = nn.Sequential(nn.ConvTranspose2d(4 * c, 2 * c, 4, 2, 1), nn.ReLU(),
                                 nn.ConvTranspose2d(2 * c, c, 4, 2, 1), nn.ReLU(),
                                 nn.ConvTranspose2d(c, 2, 4, 2, 1))                # pothole, crack

    def forward(self, x):
        return self.dec(self.enc(x))


class Callback:
    def on_step_end(self, trainer, loss):
        pass


class EMACallback(Callback):
    def __init__(self, model, decay=0.999):
        self.shadow = [p.detach().clone() for p in model.parameters()]
        self.decay = decay

    def on_step_end(self, trainer, loss):
        for s, p in zip(self.shadow, trainer.model.parameters()):
            s.lerp_(p.detach(), 1 - self.decay)  # CLEAN: in-place EMA of the weights, replayed every step


class ConsoleLogger(Callback):
    def __init__(self, every=50):
        self.every, self.t0 = every, time.perf_counter()

    def on_step_end(self, trainer, loss):
        now = time.perf_counter()  # HAZARD: host-code
        value = loss.item()  # HAZARD: host-sync
        print(f"loss {value:.4f}  {now - self.t0:.1f}s")
        self.t0 = now


class CheckpointMirror(Callback):
    def __init__(self, model):
        self.stream = torch.cuda.Stream()
        self.mirror = [torch.empty_like(p) for p in model.parameters()]

    def on_step_end(self, trainer, loss):
        with torch.cuda.stream(self.stream):  # HAZARD: stream
            for m, p in zip(self.mirror, trainer.model.parameters()):
                m.copy_(p.detach(), non_blocking=True)


class Trainer:
    def __init__(self, model, callbacks=(), batch=16, size=384):
        self.model = model.cuda()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3, weight_decay=1e-5)
        self.callbacks = list(callbacks)
        self.x = torch.zeros(batch, 3, size, size, device="cuda")
        self.y = torch.zeros(batch, 2, size, size, device="cuda")
        self.steps = torch.zeros((), device="cuda")

    def _step(self):
        logits = self.model(self.x)
        prob = logits.sigmoid()
        dice = 1 - (2 * (prob * self.y).sum((2, 3)) + 1) / (prob.sum((2, 3)) + self.y.sum((2, 3)) + 1)
        loss = F.binary_cross_entropy_with_logits(logits, self.y, pos_weight=torch.full_like(self.y[0, :, :1, :1], 8.0)) + dice.mean()
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)  # CLEAN: clip_grad_norm_ is sync-free
        self.opt.step()  # HAZARD: optimizer
        self.steps += 1  # CLEAN: device-side step counter
        for cb in self.callbacks:
            cb.on_step_end(self, loss.detach())
        return loss.detach()

    def fit(self, loader, epochs=30):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            self.static_loss = self._step()
        for _ in range(epochs):
            for img, mask in loader:
                self.x.copy_(img)
                self.y.copy_(mask)
                g.replay()


if __name__ == "__main__":
    model = RoadSegNet().cuda()
    trainer = Trainer(model, callbacks=[EMACallback(model), ConsoleLogger(), CheckpointMirror(model)])
    data = [(torch.rand(16, 3, 384, 384, device="cuda"), (torch.rand(16, 2, 384, 384, device="cuda") > 0.97).float())
            for _ in range(10)]
    trainer.fit(data, epochs=2)
