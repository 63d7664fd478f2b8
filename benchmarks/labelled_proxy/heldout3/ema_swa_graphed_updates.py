"""Weight-averaging utilities (EMA + SWA) whose per-step updates run as CUDA graphs.

Updating thousands of small parameter tensors is launch bound, so each update is
captured on first call by the `captured_on_first_call` decorator and replayed.
"""
import functools
import time

import torch
from torch.cuda import synchronize as cuda_sync


def captured_on_first_call(warmup=2):
    def deco(fn):
        graphs = {}

        @functools.wraps(fn)
        def wrapper(self):
            g = graphs.get(id(self))
            if g is None:
                for _ in range(warmup):
                    fn(self)
                torch.cuda.synchronize()
                g = torch.cuda.CUDAGraph()
                g.capture_begin()  # HAZARD: stream
                fn(self)
                g.capture_end()
                graphs[id(self)] = g
            g.replay()

        return wrapper

    return deco


class EMATracker:
    def __init__(self, model, decay=0.9999):
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.shadow = [p.detach().clone() for p in self.params]
        self.base_decay = decay
        self.num_updates = 0

    @captured_on_first_call()
    def _update(self):
        decay = min(self.base_decay, (1 + self.num_updates) / (10 + self.num_updates))  # HAZARD: python-scalar
        torch._foreach_lerp_(self.shadow, self.params, 1.0 - decay)

    def update(self):
        self.num_updates += 1
        self._update()

    def copy_to(self, model):
        for s, p in zip(self.shadow, model.parameters()):
            p.data.copy_(s)


class SWAAverager:
    def __init__(self, model):
        self.params = list(model.parameters())
        self.avg = [p.detach().clone() for p in self.params]
        self.weight = torch.zeros((), device=self.params[0].device)
        self.count = 0
        self.started_at = 0.0
        self.last_ms = 0.0

    @captured_on_first_call(warmup=3)
    def _accumulate(self):
        self.started_at = time.perf_counter()  # HAZARD: host-code
        for a, p in zip(self.avg, self.params):
            a.lerp_(p.detach(), self.weight)  # CLEAN: weight is a device tensor refreshed in place before each replay
        cuda_sync()  # HAZARD: host-sync
        torch.cuda.empty_cache()  # HAZARD: memory

    def update(self):
        self.weight.fill_(1.0 / (self.count + 1))  # CLEAN: in-place fill of the captured weight tensor, outside the graph
        self.count += 1
        self._accumulate()
        self.last_ms = (time.perf_counter() - self.started_at) * 1e3


def train_with_averaging(model, opt, loader, loss_fn, swa_start):
    ema, swa = EMATracker(model), SWAAverager(model)
    for step, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        ema.update()
        if step >= swa_start and step % 100 == 0:
            swa.update()
            print(f"swa update took {swa.last_ms:.2f} ms")  # CLEAN: host print after replay, outside the graph
    return ema, swa
