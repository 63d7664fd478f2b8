"""Transaction-cost (liquidity) model for US corporate bonds, trained on TRACE prints.

The trainer captures the whole step (forward, backward, AdamW) in one CUDA graph
and fires user callbacks from inside it."""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Callback:
    """Hooks fired from inside Trainer._step; subclasses override what they need."""
    def on_batch(self, trainer, x): pass
    def on_loss(self, trainer, loss): pass
    def on_grads(self, trainer): pass
    def on_step_end(self, trainer): pass


class SizeJitter(Callback):
    def __init__(self):                      # TRACE caps disseminated sizes: jitter log-size a little
        self.gen = torch.Generator(device="cuda").manual_seed(11)

    def on_batch(self, trainer, x):
        x[:, 0] += 0.02 * torch.randn(x.shape[0], device=x.device, generator=self.gen)  # HAZARD: rng


class GradAudit(Callback):
    def __init__(self):
        self.stream, self.norm_ema = torch.cuda.Stream(), torch.zeros((), device="cuda")

    def on_grads(self, trainer):
        with torch.cuda.stream(self.stream):  # HAZARD: stream
            n = torch.stack([p.grad.norm() for p in trainer.model.parameters()]).norm()
            self.norm_ema.lerp_(n, 0.01)


class Telemetry(Callback):
    def __init__(self):
        self.values = []

    def on_loss(self, trainer, loss):
        self.values.append(loss.item())  # HAZARD: host-sync

    def on_step_end(self, trainer):
        trainer.wall.append(time.perf_counter())  # HAZARD: host-code


class EMA(Callback):
    def __init__(self, model, decay=0.999):
        self.shadow, self.decay = [p.detach().clone() for p in model.parameters()], decay

    def on_step_end(self, trainer):
        for s, p in zip(self.shadow, trainer.model.parameters()):
            s.lerp_(p.detach(), 1 - self.decay)  # CLEAN: in-place lerp_ on device


class Trainer:
    def __init__(self, model, callbacks, batch: int = 4096, n_feat: int = 16):
        self.model = model.cuda()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=5e-4, capturable=True)
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=200)
        self.cbs = callbacks
        self.x, self.y = torch.zeros(batch, n_feat, device="cuda"), torch.zeros(batch, device="cuda")
        self.step_t = torch.zeros((), dtype=torch.long, device="cuda")
        self.wall, self.graph = [], None

    def _fire(self, name, *args):
        for cb in self.cbs:
            getattr(cb, name)(self, *args)

    def _step(self):
        self._fire("on_batch", self.x)
        loss = F.huber_loss(self.model(self.x).squeeze(-1), self.y, delta=0.5)
        self._fire("on_loss", loss)
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self._fire("on_grads")
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)  # CLEAN: clip_grad_norm_ is capturable
        self.opt.step()  # CLEAN: AdamW built with capturable=True
        self.step_t += 1  # CLEAN: device-side step counter
        self._fire("on_step_end")
        return loss.detach()

    def _capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_loss = self._step()

    def fit(self, loader, epochs: int):
        for epoch in range(epochs):
            for x, y in loader:
                self.x.copy_(x)  # CLEAN: copy_ into the static inputs
                self.y.copy_(y)
                if self.graph is None:
                    self._capture()
                self.graph.replay()
            self.sched.step()  # HAZARD: optimizer


if __name__ == "__main__":
    net = nn.Sequential(nn.Linear(16, 128), nn.GELU(), nn.Linear(128, 64), nn.GELU(), nn.Linear(64, 1))
    cbs = [SizeJitter(), Telemetry(), GradAudit(), EMA(net)]
    Trainer(net, cbs).fit([(torch.randn(4096, 16), torch.randn(4096)) for _ in range(8)], epochs=3)
