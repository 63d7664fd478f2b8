# Issue: "Whole training step captured, callbacks fired inside it. Capture
# fails in the grad-norm logger and in the loss mirror; with those two disabled
# it captures, but the LR schedule and the step timer are frozen." Minimal
# trainer below (torch 2.11, H200).
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Callback:
    def on_after_backward(self, tr):
        pass

    def on_step_end(self, tr):
        pass


class GradNormLogger(Callback):
    def on_after_backward(self, tr):
        total = torch.stack([p.grad.norm() for p in tr.params]).norm()
        tr.logs["grad_norm"] = total.item()  # HAZARD: host-sync


class StepTimer(Callback):
    def on_step_end(self, tr):
        tr.logs["t_end"] = time.time()  # HAZARD: host-code


class LossMirror(Callback):
    def __init__(self):
        self.stream = torch.cuda.Stream()
        self.buf = torch.zeros((), device="cuda")

    def on_step_end(self, tr):
        with torch.cuda.stream(self.stream):  # HAZARD: stream
            self.buf.copy_(tr.static_loss.detach())


class EMA(Callback):
    def __init__(self, params):
        self.shadow = [p.detach().clone() for p in params]

    def on_step_end(self, tr):
        for s, p in zip(self.shadow, tr.params):
            s.lerp_(p.detach(), 0.001)  # CLEAN: in-place lerp on tensors the graph owns


class Trainer:
    def __init__(self, model, callbacks):
        self.model, self.callbacks, self.logs = model, callbacks, {}
        self.params = list(model.parameters())
        self.opt = torch.optim.AdamW(self.params, lr=1e-3, capturable=True)  # CLEAN: capturable AdamW in the graph
        self.sched = torch.optim.lr_scheduler.OneCycleLR(self.opt, max_lr=1e-3, total_steps=1000)
        self.x = torch.randn(256, 128, device="cuda")
        self.y = torch.randint(0, 10, (256,), device="cuda")

    def _step(self):
        self.opt.zero_grad(set_to_none=False)  # CLEAN: grads zeroed in place inside the graph
        self.static_loss = F.cross_entropy(self.model(self.x), self.y)
        self.static_loss.backward()
        for cb in self.callbacks:
            cb.on_after_backward(self)
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)  # CLEAN: no host sync in clip_grad_norm_
        self.opt.step()
        for cb in self.callbacks:
            cb.on_step_end(self)

    def fit(self, batches):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._step()
        for xb, yb in batches:
            self.x.copy_(xb)
            self.y.copy_(yb)
            self.graph.replay()
            self.sched.step()  # HAZARD: optimizer
            print(self.logs, "lr", self.sched.get_last_lr()[0])


model = nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 10)).cuda()
tr = Trainer(model, [GradNormLogger(), StepTimer(), LossMirror(), EMA(model.parameters())])
tr.fit([(torch.randn(256, 128, device="cuda"), torch.randint(0, 10, (256,), device="cuda")) for _ in range(20)])
