"""Stochastic weight averaging for an image classifier with compiled evaluation.

The averaged model is compiled once with mode="reduce-overhead" and handed to an
Evaluator; after every SWA update its BatchNorm statistics are recomputed.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import compile as tcompile
from torch.optim.swa_utils import SWALR, AveragedModel

log = logging.getLogger("swa")


class Block(nn.Module):
    def __init__(self, c_in, c_out, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.skip = nn.Conv2d(c_in, c_out, 1, stride, bias=False) if stride != 1 or c_in != c_out else nn.Identity()

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.skip(x))


class SmallResNet(nn.Module):
    def __init__(self, n_classes=100, widths=(64, 128, 256, 512)):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU())
        blocks, c = [], widths[0]
        for i, w in enumerate(widths):
            blocks.append(Block(c, w, stride=1 if i == 0 else 2))
            c = w
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(c, n_classes)

    def forward(self, x):
        log.debug("forward batch of %d images", x.shape[0])  # HAZARD: host-code
        return self.fc(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1).flatten(1))


def reset_bn(model):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean = torch.zeros_like(m.running_mean)  # HAZARD: static-address
            m.running_var.fill_(1.0)  # CLEAN: in-place reset keeps the buffer address
            m.num_batches_tracked.zero_()


class Evaluator:
    def __init__(self, model_fn, loader):
        self.model_fn, self.loader = model_fn, loader

    @torch.no_grad()
    def accuracy(self):
        correct = total = 0
        for x, y in self.loader:
            logits = self.model_fn(x.cuda(non_blocking=True))  # HAZARD: dynamic-shape
            correct += (logits.argmax(-1).cpu() == y).sum().item()  # CLEAN: eager metric outside the compiled model
            total += y.shape[0]
        return correct / total


def train_swa(model, train_loader, val_loader, epochs=200, swa_start=150, lr=0.1):
    model = model.cuda()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4, nesterov=True)
    swa_model = AveragedModel(model)
    swa_sched = SWALR(opt, swa_lr=0.05, anneal_epochs=5)
    evaluator = Evaluator(tcompile(swa_model, mode="reduce-overhead"), val_loader)
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            loss = F.cross_entropy(model(x.cuda()), y.cuda())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        if epoch >= swa_start:
            swa_model.update_parameters(model)
            swa_sched.step()  # CLEAN: the optimizer step here is eager, not captured or compiled
            reset_bn(swa_model)
            swa_model.train()
            with torch.no_grad():
                for x, _ in train_loader:
                    swa_model(x.cuda())
            swa_model.eval()
            print(f"epoch {epoch} swa acc {evaluator.accuracy():.4f}")
