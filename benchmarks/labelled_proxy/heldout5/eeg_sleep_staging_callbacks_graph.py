"""Single-channel EEG sleep staging; one graphed training step that fires the trainer's callbacks."""
import logging
import time
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("sleep")


class Callback:
    def on_after_backward(self, trainer): pass
    def on_step_end(self, trainer): pass
    def on_epoch_end(self, trainer, epoch): pass


class GradNormLogger(Callback):
    history = []

    def on_after_backward(self, trainer):
        total = torch.norm(torch.stack([p.grad.norm() for p in trainer.model.parameters()]))
        self.history.append(total.item())  # HAZARD: host-sync


class EMACallback(Callback):
    def __init__(self, model, decay=0.999):
        self.decay, self.shadow = decay, [p.detach().clone() for p in model.parameters()]

    def on_step_end(self, trainer):
        for s, p in zip(self.shadow, trainer.model.parameters()):
            s.mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)  # CLEAN: decay fixed for the whole run


class StepTimer(Callback):
    def on_step_end(self, trainer):
        trainer.last_step_time = time.perf_counter()  # HAZARD: host-code


class SmoothingSchedule(Callback):
    def on_epoch_end(self, trainer, epoch):  # label smoothing annealed from 0.2 to 0
        trainer.smoothing = max(0.0, 0.2 - 0.02 * epoch)


class SleepNet(nn.Module):
    def __init__(self, n_cls=5):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(1, 64, 50, stride=6, padding=24), nn.BatchNorm1d(64), nn.ReLU(), nn.MaxPool1d(8),
            nn.Conv1d(64, 128, 8, padding=4), nn.BatchNorm1d(128), nn.ReLU(),
            nn.Conv1d(128, 128, 8, padding=4), nn.BatchNorm1d(128), nn.ReLU(), nn.AdaptiveAvgPool1d(1))
        self.fc = nn.Sequential(nn.Dropout(0.5), nn.Linear(128, n_cls))

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


class SleepTrainer:
    def __init__(self, model, callbacks, batch=256, epoch_len=3000):
        self.model, self.callbacks = model.cuda(), callbacks
        self.opt = torch.optim.NAdam(self.model.parameters(), lr=1e-3, weight_decay=1e-4)
        self.smoothing, self.class_w = 0.2, torch.tensor([1.0, 1.8, 1.0, 1.2, 1.4], device="cuda")  # W, N1, N2, N3, REM
        self.steps_t = torch.zeros((), device="cuda", dtype=torch.long)
        self.x, self.y = torch.zeros(batch, 1, epoch_len, device="cuda"), torch.zeros(batch, dtype=torch.long, device="cuda")

    def _step(self):
        eps = self.smoothing  # HAZARD: python-scalar
        loss = F.cross_entropy(self.model(self.x), self.y, weight=self.class_w, label_smoothing=eps)
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        for cb in self.callbacks:
            cb.on_after_backward(self)
        gn = nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)  # CLEAN: returns a device tensor, no host read
        self.opt.step()  # HAZARD: optimizer
        self.steps_t += 1  # CLEAN: step counter kept on the device
        for cb in self.callbacks:
            cb.on_step_end(self)
        return loss.detach(), gn

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            log.info("capturing the sleep-staging train step")  # CLEAN: plain string logged once during capture
            self.loss, self.gn = self._step()

    def fit(self, loader, epochs):
        self.capture()
        for epoch in range(epochs):
            for x, y in loader:  # drop_last=True
                self.x.copy_(x, non_blocking=True)
                self.y.copy_(y, non_blocking=True)
                self.graph.replay()
            for cb in self.callbacks:
                cb.on_epoch_end(self, epoch)
            log.info("epoch %d loss %.4f grad-norm %.3f", epoch, self.loss.item(), self.gn.item())


def run(loader, epochs=30):
    net = SleepNet()
    SleepTrainer(net, [GradNormLogger(), EMACallback(net.cuda()), StepTimer(), SmoothingSchedule()]).fit(loader, epochs)
