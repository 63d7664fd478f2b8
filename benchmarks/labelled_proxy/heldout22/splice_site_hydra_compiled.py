"""SpliceAI-style splice-site prediction (dilated residual CNN over one-hot pre-mRNA) configured with
hydra-style structured configs and `_target_` instantiation; the train step and the optimizer step are
compiled with the mode named in the config (max-autotune)."""
import importlib
import logging
from dataclasses import asdict, dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("spliceai")

@dataclass
class ModelConf:
    _target_: str = "__main__.SpliceAI"
    channels: int = 32
    context: int = 400

@dataclass
class OptimConf:
    lr: float = 1e-3
    decay_epochs: tuple = (6, 7, 8, 9)
    decay: float = 0.5

@dataclass
class TrainConf:
    model: ModelConf = field(default_factory=ModelConf)
    optim: OptimConf = field(default_factory=OptimConf)
    compile_mode: str = "max-autotune"
    epochs: int = 10

def instantiate(conf, **kwargs):
    spec = asdict(conf)
    module, name = spec.pop("_target_").rsplit(".", 1)
    return getattr(importlib.import_module(module), name)(**spec, **kwargs)

class ResBlock(nn.Module):
    def __init__(self, c, k, d):
        super().__init__()
        self.body = nn.Sequential(nn.BatchNorm1d(c), nn.ReLU(), nn.Conv1d(c, c, k, dilation=d, padding=d * (k - 1) // 2),
                                  nn.BatchNorm1d(c), nn.ReLU(), nn.Conv1d(c, c, k, dilation=d, padding=d * (k - 1) // 2))

    def forward(self, x):
        return x + self.body(x)

class SpliceAI(nn.Module):
    def __init__(self, channels=32, context=400):
        super().__init__()
        self.crop = context // 2
        self.stem = nn.Conv1d(4, channels, 1)
        self.blocks = nn.Sequential(*[ResBlock(channels, 11, d) for d in (1, 1, 1, 1, 4, 4, 4, 4)])
        self.out = nn.Conv1d(channels, 3, 1)

    def forward(self, x):
        return self.out(self.blocks(self.stem(x)))[:, :, self.crop:-self.crop]

def collate(windows):
    longest = max(w.shape[-1] for w in windows)
    return torch.stack([F.pad(w, (0, longest - w.shape[-1])) for w in windows])

class SpliceTrainer:
    def __init__(self, cfg: TrainConf):
        self.cfg = cfg
        self.model = instantiate(cfg.model).cuda()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=cfg.optim.lr)
        self.train_step = torch.compile(self._train_step, mode=cfg.compile_mode)
        self.opt_step = torch.compile(self.opt.step, mode=cfg.compile_mode)
        self.eval_step = torch.compile(self._eval_step)
        self.class_weights = torch.tensor([1.0, 40.0, 40.0], device="cuda")

    def _train_step(self, x, y):
        loss = F.cross_entropy(self.model(x), y, weight=self.class_weights)
        if not torch.isfinite(loss):  # HAZARD: dynamic-control-flow
            loss = torch.zeros_like(loss)
        log.info("train loss %s", loss.detach())  # HAZARD: host-code
        return loss

    def _eval_step(self, x, y):
        probs = self.model(x).softmax(1)
        return (probs.argmax(1) == y).float().mean()

    def fit(self, train_windows, labels, batch=64):
        for epoch in range(self.cfg.epochs):
            if epoch in self.cfg.optim.decay_epochs:
                for group in self.opt.param_groups:
                    group["lr"] *= self.cfg.optim.decay  # HAZARD: optimizer
            for i in range(0, len(train_windows), batch):
                x = collate(train_windows[i:i + batch]).cuda(non_blocking=True)
                y = collate(labels[i:i + batch]).cuda(non_blocking=True)[:, self.model.crop:-self.model.crop]
                loss = self.train_step(x, y)  # HAZARD: dynamic-shape
                loss.backward()
                running = loss.detach().clone()  # CLEAN: cloned before the compiled optimizer step runs
                self.opt_step()
                self.opt.zero_grad(set_to_none=True)
            log.info("epoch %d last loss %.4f", epoch, running.item())  # CLEAN: eager read of the clone

    @torch.no_grad()
    def evaluate(self, x, y):
        self.model.eval()
        acc = self.eval_step(x, y)  # CLEAN: default-mode compile, no CUDA graphs
        self.model.train()
        return acc.item()
