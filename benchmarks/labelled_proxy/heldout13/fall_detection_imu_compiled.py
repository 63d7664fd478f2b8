"""Fall detection from a waist-worn IMU (3-axis accelerometer + gyroscope, 100 Hz,
4 s windows) for an elderly-care alarm pendant. `Trainer` runs eagerly;
`CompiledTrainer` compiles its phase methods in the constructor, and phases are
dispatched by name with getattr.
"""
import math
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

WIN = 400


class FallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(6, 48, 7, padding=3), nn.ReLU(), nn.MaxPool1d(4),
            nn.Conv1d(48, 96, 5, padding=2), nn.ReLU(), nn.AdaptiveMaxPool1d(1), nn.Flatten(),
        )
        self.fc = nn.Linear(96, 2)

    def forward(self, imu):
        return self.fc(self.conv(imu))


class Trainer:
    def __init__(self, model, lr=1e-3, epochs=40):
        self.model = model.cuda()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=lr)
        self.base_lr, self.epochs = lr, epochs

    def run_train(self, imu, y):
        if random.random() < 0.3:  # HAZARD: host-code
            imu = torch.cat([imu[:, :3], torch.zeros_like(imu[:, 3:])], 1)  # CLEAN: out-of-place gyro drop, the input is not mutated
        logits = self.model(imu)
        loss = F.cross_entropy(logits, y)
        impact_g = imu[:, :3].norm(dim=1).amax(-1)
        if impact_g.max() > 3.0:  # HAZARD: dynamic-control-flow
            loss = loss + 0.1 * F.relu(1.0 - logits[:, 1] + logits[:, 0]).mean()  # margin on hard impacts
        return loss

    def run_eval(self, imu, y):
        logits = self.model(imu)
        return (logits.argmax(-1) == y).float().mean().item()  # HAZARD: host-sync

    def run_step(self):
        self.opt.step()

    def dispatch(self, phase, *args):
        return getattr(self, f"run_{phase}")(*args)

    def set_lr(self, epoch):
        lr = 0.5 * self.base_lr * (1 + math.cos(math.pi * epoch / self.epochs))
        for g in self.opt.param_groups:
            g["lr"] = lr  # HAZARD: optimizer


class CompiledTrainer(Trainer):
    def __init__(self, model, **kw):
        super().__init__(model, **kw)
        self.run_train = torch.compile(self.run_train, mode="reduce-overhead")
        self.run_eval = torch.compile(self.run_eval, mode="reduce-overhead")
        self.run_step = torch.compile(self.run_step, mode="reduce-overhead")


def fit(trainer, train_loader, val_loader):
    for epoch in range(trainer.epochs):
        for imu, y in train_loader:
            loss = trainer.dispatch("train", imu, y)
            value = loss.detach().float().cpu()  # CLEAN: loss read before backward and before the compiled step
            trainer.opt.zero_grad(set_to_none=True)
            loss.backward()
            trainer.dispatch("step")
        trainer.set_lr(epoch)
        accs = [trainer.dispatch("eval", imu, y) for imu, y in val_loader]
        print(f"epoch {epoch:2d}  loss {value.item():.3f}  val acc {sum(accs) / len(accs):.3f}")


def make_loader(n, device="cuda"):
    return [(torch.randn(64, 6, WIN, device=device), torch.randint(0, 2, (64,), device=device)) for _ in range(n)]


if __name__ == "__main__":
    train_loader, val_loader = make_loader(50), make_loader(10)
    sanity = Trainer(FallNet(), epochs=1)
    print("eager sanity acc:", sanity.dispatch("eval", *val_loader[0]))  # CLEAN: eager base trainer, nothing compiled
    fit(CompiledTrainer(FallNet(), epochs=40), train_loader, val_loader)
