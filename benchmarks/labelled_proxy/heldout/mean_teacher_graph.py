import copy

import torch
import torch.nn as nn
import torch.nn.functional as F


def augment(x, noise_std=0.15):
    return x + noise_std * torch.randn_like(x)


class MeanTeacher:
    def __init__(self, student: nn.Module, batch_shape, num_classes, lr=1e-3, ema_decay=0.99, cons_weight=1.0):
        self.student = student
        self.teacher = copy.deepcopy(student).requires_grad_(False)
        self.opt = torch.optim.RAdam(student.parameters(), lr=lr)
        self.ema_decay = ema_decay
        self.cons_weight = cons_weight
        self.x = torch.zeros(batch_shape, device="cuda")
        self.y = torch.zeros(batch_shape[0], dtype=torch.long, device="cuda")
        self.graph = torch.cuda.CUDAGraph()
        self.num_classes = num_classes

    def _ema_update(self):
        with torch.no_grad():
            for pt, ps in zip(self.teacher.parameters(), self.student.parameters()):
                pt.mul_(self.ema_decay).add_(ps, alpha=1.0 - self.ema_decay)  # HAZARD: python-scalar

    def _step(self):
        rng = torch.cuda.get_rng_state()  # HAZARD: rng
        x_s = augment(self.x)
        torch.cuda.set_rng_state(rng)  # HAZARD: rng
        x_t = augment(self.x)
        self.views_match = torch.equal(x_s, x_t)  # HAZARD: host-sync
        self.cpu_rng = torch.get_rng_state()  # CLEAN: CPU generator state, no CUDA RNG touched
        logits = self.student(x_s)
        with torch.no_grad():
            target = self.teacher(x_t).softmax(-1)
        sup = F.cross_entropy(logits, self.y)
        cons = F.mse_loss(logits.softmax(-1), target)
        loss = sup + self.cons_weight * cons  # CLEAN: consistency weight is set once and never changed after capture
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.opt.step()  # HAZARD: optimizer
        self._ema_update()
        return loss.detach()

    def capture(self, warmup=3):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(warmup):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self.loss = self._step()

    def fit(self, loader, epochs=10):
        self.capture()
        step = 0
        for _ in range(epochs):
            for xb, yb in loader:
                self.ema_decay = min(0.999, 1.0 - 1.0 / (step + 2))
                self.x.copy_(xb)
                self.y.copy_(yb)
                self.graph.replay()
                step += 1
        return self.teacher
