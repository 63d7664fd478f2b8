"""Knowledge distillation (ResNet-50 teacher -> MobileNet student) with the step in a CUDA graph.

The trainer exposes Lightning-like callback hooks; the callbacks are invoked
from inside `train_step`, which `capture_step` turns into a graph.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def capture_step(step_fn, warmup=3, pool=None):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            step_fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, pool=pool):
        out = step_fn()
    return g, out


class GradNormMonitor:
    def __init__(self):
        self.history = []

    def on_after_backward(self, tr):
        norm = nn.utils.clip_grad_norm_(tr.student.parameters(), 5.0)
        self.history.append(norm.item())  # HAZARD: host-sync


class TemperatureAnneal:
    def __init__(self, floor=1.0, decay=0.9995):
        self.floor, self.decay = floor, decay

    def on_step_begin(self, tr):
        tr.T = max(self.floor, tr.T * self.decay)  # HAZARD: host-code


class DeviceStepCounter:
    def on_step_end(self, tr):
        tr.step_t.add_(1)  # CLEAN: device-side counter, advanced by every replay


class LossOffload:
    def __init__(self):
        self.copy_stream = torch.cuda.Stream()
        self.host = torch.zeros(2, pin_memory=True)

    def on_step_end(self, tr):
        with torch.cuda.stream(self.copy_stream):  # HAZARD: stream
            self.host.copy_(torch.stack([tr.loss_t, tr.kd_t]), non_blocking=True)


class DistillTrainer:
    def __init__(self, teacher, student, callbacks, batch=128, T=4.0, alpha=0.7):
        self.teacher, self.student = teacher.eval().cuda(), student.cuda().train()
        self.callbacks, self.T, self.alpha = callbacks, T, alpha
        self.opt = torch.optim.RMSprop(self.student.parameters(), lr=1e-3, momentum=0.9, alpha=0.9)
        self.x = torch.zeros(batch, 3, 224, 224, device="cuda")
        self.y = torch.zeros(batch, dtype=torch.long, device="cuda")
        self.step_t = torch.zeros((), dtype=torch.long, device="cuda")
        self.loss_t = torch.zeros((), device="cuda")
        self.kd_t = torch.zeros((), device="cuda")

    def _fire(self, hook):
        for cb in self.callbacks:
            fn = getattr(cb, hook, None)
            if fn is not None:
                fn(self)

    def train_step(self):
        self._fire("on_step_begin")
        with torch.autocast("cuda", dtype=torch.bfloat16):  # CLEAN: autocast entered inside the captured step
            with torch.no_grad():
                t_logits = self.teacher(self.x)
            s_logits = self.student(self.x)
            kd = F.kl_div(F.log_softmax(s_logits / self.T, -1), F.softmax(t_logits / self.T, -1),
                          reduction="batchmean") * self.T ** 2
            ce = F.cross_entropy(s_logits, self.y)
            loss = self.alpha * kd + (1 - self.alpha) * ce
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self._fire("on_after_backward")
        self.opt.step()  # HAZARD: optimizer
        self.loss_t.copy_(loss.detach())
        self.kd_t.copy_(kd.detach())
        self._fire("on_step_end")

    def fit(self, loader):
        graph, _ = capture_step(self.train_step)
        for xb, yb in loader:
            self.x.copy_(xb, non_blocking=True)  # CLEAN: batch copied into the static input
            self.y.copy_(yb, non_blocking=True)
            graph.replay()
        return self.loss_t.item()
