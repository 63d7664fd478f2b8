"""Keras-style `Model.compile()/fit()` front end for PyTorch modules.

`compile(jit_compile=True)` maps to torch.compile(mode="reduce-overhead") on the
train step (forward, loss, backward, optimizer step); `test_step` uses plain
torch.compile. Callbacks follow the Keras names, including ReduceLROnPlateau.
"""
from dataclasses import dataclass, field

import torch
import torch.nn as nn


@dataclass
class CompileConfig:
    jit_compile: bool = True
    modes: dict = field(default_factory=lambda: {True: "reduce-overhead", False: "default"})


class ReduceLROnPlateau:
    def __init__(self, factor=0.5, patience=2, min_lr=1e-6):
        self.factor, self.patience, self.min_lr = factor, patience, min_lr
        self.best, self.wait = float("inf"), 0

    def on_epoch_end(self, model, logs):
        if logs["val_loss"] < self.best - 1e-4:
            self.best, self.wait = logs["val_loss"], 0
            return
        self.wait += 1
        if self.wait >= self.patience:
            for group in model.optimizer.param_groups:
                group["lr"] = max(group["lr"] * self.factor, self.min_lr)  # HAZARD: optimizer
            self.wait = 0


class KModel:
    def __init__(self, net: nn.Module):
        self.net = net.cuda()
        self.history = {"loss": [], "acc": [], "val_loss": []}

    def compile(self, optimizer, loss, config=CompileConfig()):
        self.optimizer, self.loss_fn = optimizer, loss
        mode = config.modes[config.jit_compile]
        self._train_fn = torch.compile(self.train_step, mode=mode)
        self._test_fn = torch.compile(self.test_step)

    def train_step(self, x, y):
        logits = self.net(x)
        loss = self.loss_fn(logits, y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        acc = (logits.argmax(-1) == y).float().mean().item()  # HAZARD: host-sync
        return loss.detach(), acc

    def test_step(self, x, y):
        logits = self.net(x)
        return self.loss_fn(logits, y).item()  # CLEAN: plain torch.compile, no CUDA graphs

    def fit(self, train_loader, val_loader, epochs=10, callbacks=()):
        for epoch in range(epochs):
            self.net.train()
            for x, y in train_loader:  # drop_last=False: the last batch of each epoch is short
                loss, acc = self._train_fn(x.cuda(non_blocking=True), y.cuda(non_blocking=True))  # HAZARD: dynamic-shape
                self.history["loss"].append(loss)  # HAZARD: static-address
                self.history["acc"].append(acc)  # CLEAN: a Python float, not a graph-owned tensor
            self.net.eval()
            with torch.no_grad():
                val = [self._test_fn(x.cuda(), y.cuda()) for x, y in val_loader]
            logs = {"val_loss": sum(val) / len(val)}
            self.history["val_loss"].append(logs["val_loss"])
            for cb in callbacks:
                cb.on_epoch_end(self, logs)
            last = torch.stack(self.history["loss"][-len(train_loader):]).mean().item()
            print(f"epoch {epoch + 1}/{epochs} loss {last:.4f} val_loss {logs['val_loss']:.4f}")
        return self.history


def make_model(n_in, n_cls):
    net = nn.Sequential(nn.Linear(n_in, 512), nn.ReLU(), nn.Dropout(0.1), nn.Linear(512, n_cls))
    model = KModel(net)
    model.compile(torch.optim.Adam(net.parameters(), lr=1e-3), nn.CrossEntropyLoss())
    return model
