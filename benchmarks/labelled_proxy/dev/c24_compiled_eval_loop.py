"""Validation loop for a classifier; the model is compiled with reduce-overhead."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ConvNet(nn.Module):
    def __init__(self, n_cls=100, log_every=0):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.fc = nn.Linear(128, n_cls)
        self.log_every = log_every
        self.seen = []

    def forward(self, x):
        with torch.autocast("cuda", dtype=torch.bfloat16):  # CLEAN: autocast inside a compiled region is traced, no weight cache
            logits = self.fc(self.features(x))
        if self.log_every > 0:  # CLEAN: int setting from __init__
            self.seen.append(x.shape[0])  # HAZARD: host-code
        conf = logits.float().softmax(-1).amax(-1)
        conf_hist = conf.cpu()  # HAZARD: host-sync
        return logits.float(), conf_hist


@torch.no_grad()
def evaluate(model, loader):
    cmodel = torch.compile(model.eval(), mode="reduce-overhead")
    correct = total = 0
    all_conf = []
    for x, y in loader:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        logits, conf = cmodel(x)
        correct += (logits.argmax(-1) == y).sum().item()
        total += y.numel()
        all_conf.append(conf)
    acc = correct / total
    loss = F.cross_entropy(logits, y)
    print(f"acc={acc:.4f} last-batch loss={loss.item():.4f}")
    return acc, torch.cat(all_conf)
