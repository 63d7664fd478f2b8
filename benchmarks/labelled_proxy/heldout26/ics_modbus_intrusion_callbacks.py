"""Intrusion detection for a water-treatment plant's Modbus/TCP network (online learning).

A span-port sensor parses Modbus function codes, register addresses and values into
fixed-length command windows. The detector keeps training online on windows the SOC analysts
confirm as benign; one whole training step is captured in a CUDA graph by the ``GraphTrainer``
and fires callbacks (monitoring, loss offload, early stopping) from inside the step.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

WIN, FC, REGS = 32, 128, 4096


class CommandModel(nn.Module):
    def __init__(self, d=96):
        super().__init__()
        self.fc_emb, self.reg_emb = nn.Embedding(FC, d), nn.Embedding(REGS, d)
        self.val = nn.Linear(1, d)
        self.conv = nn.Conv1d(d, d, 3, padding=1)
        self.next_fc = nn.Linear(d, FC)

    def forward(self, fc, reg, val):
        h = self.fc_emb(fc) + self.reg_emb(reg) + self.val(val.unsqueeze(-1))
        return self.next_fc(F.gelu(self.conv(h.transpose(1, 2))).transpose(1, 2))


class GradNormMonitor:
    def on_after_backward(self, trainer, loss):
        gn = torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), 5.0)  # CLEAN: capturable, returns a device tensor
        trainer.history["grad_norm"].append(gn.item())  # HAZARD: host-sync


class LossEMA:
    def __init__(self, dev="cuda"):
        self.ema = torch.zeros((), device=dev)

    def on_after_backward(self, trainer, loss):
        self.ema.mul_(0.98).add_(0.02 * loss.detach())  # CLEAN: device-side running average


class LossOffload:
    def __init__(self, dev="cuda"):
        self.side = torch.cuda.Stream()
        self.host = torch.zeros((), pin_memory=True)

    def on_after_backward(self, trainer, loss):
        with torch.cuda.stream(self.side):  # HAZARD: stream
            self.host.copy_(loss.detach(), non_blocking=True)


class EarlyStop:
    def __init__(self):
        self.best = float("inf")

    def on_after_backward(self, trainer, loss):
        if loss < self.best:  # HAZARD: dynamic-control-flow
            self.best = loss.detach()


class GraphTrainer:
    def __init__(self, model, callbacks, dev="cuda"):
        self.model, self.callbacks = model.to(dev), callbacks
        self.opt = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=0.01, capturable=True)
        self.fc = torch.zeros(64, WIN, dtype=torch.long, device=dev)
        self.reg = torch.zeros_like(self.fc)
        self.val = torch.zeros(64, WIN, device=dev)
        self.history = {"grad_norm": []}
        self.graph = torch.cuda.CUDAGraph()

    def _step(self):
        logits = self.model(self.fc[:, :-1], self.reg[:, :-1], self.val[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, FC), self.fc[:, 1:].reshape(-1))
        loss.backward()
        for cb in self.callbacks:
            cb.on_after_backward(self, loss)
        self.opt.step()  # CLEAN: AdamW with capturable=True
        self.opt.zero_grad(set_to_none=False)
        return loss.detach()

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self.loss = self._step()

    def fit_window(self, fc, reg, val):
        self.fc.copy_(fc)
        self.reg.copy_(reg)
        self.val.copy_(val)
        self.graph.replay()
        return self.loss

    def on_shift_change(self, night):
        for g in self.opt.param_groups:
            g["lr"] = 5e-5 if night else 2e-4  # HAZARD: optimizer
            g["weight_decay"] = 0.05 if night else 0.01  # HAZARD: optimizer


def score(model, fc, reg, val):
    with torch.no_grad():
        logits = model(fc[:, :-1], reg[:, :-1], val[:, :-1])
        nll = F.cross_entropy(logits.transpose(1, 2), fc[:, 1:], reduction="none").mean(1)
    return nll.cpu()  # CLEAN: eager scoring outside the captured step
