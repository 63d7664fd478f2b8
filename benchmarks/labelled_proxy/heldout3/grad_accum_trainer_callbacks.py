"""Trainer that captures a whole gradient-accumulation step (N micro-batches + update).

Callbacks are invoked from inside the captured step so that user extensions
(loss tracking, guards, gradient noise) see every micro-batch.
"""
import contextlib

import torch


@contextlib.contextmanager
def graph_region(graph, pool=None):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # CLEAN: side stream forked from and joined back to the caller's stream
        graph.capture_begin(pool=pool)
        try:
            yield graph
        finally:
            graph.capture_end()
    torch.cuda.current_stream().wait_stream(stream)


class Callback:
    def on_microbatch_end(self, trainer, loss):
        pass

    def on_before_step(self, trainer):
        pass


class LossMeter(Callback):
    def __init__(self):
        self.history = []

    def on_microbatch_end(self, trainer, loss):
        self.history.append(loss.detach().item())  # HAZARD: host-sync


class NonFiniteGuard(Callback):
    def on_microbatch_end(self, trainer, loss):
        if not torch.isfinite(loss):  # HAZARD: dynamic-control-flow
            raise FloatingPointError(f"non-finite loss at step {trainer.global_step}")


class GradientNoise(Callback):
    def __init__(self, sigma=1e-3, seed=0):
        self.sigma = sigma
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(seed)

    def on_before_step(self, trainer):
        for p in trainer.params:
            p.grad.add_(torch.randn(p.grad.shape, device=p.device, generator=self.gen), alpha=self.sigma)  # HAZARD: rng


class AccumTrainer:
    def __init__(self, model, loss_fn, micro_shape, accum=4, callbacks=(), lr=3e-4, total_steps=10_000):
        self.model, self.loss_fn, self.accum = model.cuda(), loss_fn, accum
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.callbacks = list(callbacks)
        self.opt = torch.optim.AdamW(self.params, lr=lr, weight_decay=0.05, capturable=True)
        self.sched = torch.optim.lr_scheduler.OneCycleLR(self.opt, max_lr=lr, total_steps=total_steps)
        self.xs = torch.zeros(accum, *micro_shape, device="cuda")
        self.ys = torch.zeros(accum, micro_shape[0], dtype=torch.long, device="cuda")
        self.global_step = 0
        self.graph = None

    def _step(self):
        for i in range(self.accum):
            loss = self.loss_fn(self.model(self.xs[i]), self.ys[i]) / self.accum  # CLEAN: accum is fixed for the run
            loss.backward()
            for cb in self.callbacks:
                cb.on_microbatch_end(self, loss)
        for cb in self.callbacks:
            cb.on_before_step(self)
        self.opt.step()  # CLEAN: capturable AdamW keeps its step counter on the device
        self.opt.zero_grad(set_to_none=False)

    def setup(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with graph_region(self.graph):
            self._step()

    def fit(self, loader):
        for xs, ys in loader:
            self.xs.copy_(xs, non_blocking=True)
            self.ys.copy_(ys, non_blocking=True)
            self.graph.replay()
            self.sched.step()  # HAZARD: optimizer
            self.global_step += 1
