""""What can I cook?" — ingredient recognition from fridge photos.

A multi-label classifier spots ingredients in a photo of the open fridge;
the app then ranks recipes by coverage. The base Trainer is plain eager
PyTorch; the production subclass swaps its step, predict and optimizer
step for reduce-overhead compiled versions. Phases are dispatched by name.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

N_INGR = 320


class FridgeNet(nn.Module):
    def __init__(self):
        super().__init__()
        chans = [3, 32, 64, 128, 256]
        self.body = nn.Sequential(*[nn.Sequential(nn.Conv2d(a, b, 3, 2, 1), nn.BatchNorm2d(b), nn.SiLU())
                                    for a, b in zip(chans, chans[1:])])
        self.head = nn.Linear(256, N_INGR)

    def forward(self, x):
        return self.head(F.adaptive_avg_pool2d(self.body(x), 1).flatten(1))


class Trainer:
    def __init__(self, model, lr=2e-3):
        self.model, self.base_lr = model.cuda(), lr
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=0.05)
        self.opt_step = self.opt.step
        self.last_acc = 0.0

    def train_step(self, imgs, labels):
        logits = self.model(imgs)
        loss = F.binary_cross_entropy_with_logits(logits, labels)
        if torch.isnan(loss):  # HAZARD: dynamic-control-flow
            loss = logits.sum() * 0.0
        self.last_acc = ((logits > 0) == (labels > 0.5)).float().mean().item()  # HAZARD: host-sync
        return loss

    def predict(self, imgs):
        return torch.sigmoid(self.model(imgs))

    def run(self, phase, *args, **kw):
        return getattr(self, f"run_{phase}")(*args, **kw)

    def run_train(self, loader, epochs=30):
        self.model.train()
        for epoch in range(epochs):
            lr = 0.5 * self.base_lr * (1 + math.cos(math.pi * epoch / epochs))
            for group in self.opt.param_groups:
                group["lr"] = lr  # HAZARD: optimizer
            epoch_loss = torch.zeros((), device="cuda")
            for imgs, labels in loader:
                loss = self.train_step(imgs, labels)
                epoch_loss += loss.detach()  # CLEAN: read before backward and the compiled optimizer step
                loss.backward()
                self.opt_step()
                self.opt.zero_grad(set_to_none=False)
            print(f"epoch {epoch}: loss {epoch_loss.item() / len(loader):.4f}, acc {self.last_acc:.3f}")

    @torch.no_grad()
    def run_serve(self, photos):
        self.model.eval()
        found = []
        for p in photos:
            probs = self.predict(p[None])  # HAZARD: dynamic-shape
            found.append((probs[0] > 0.5).nonzero().flatten().tolist())
        return found

    @torch.no_grad()
    def run_serve_resized(self, photos):
        self.model.eval()
        found = []
        for p in photos:
            probs = self.predict(F.interpolate(p[None], size=(448, 448), mode="bilinear"))  # CLEAN: one fixed input size
            found.append((probs[0] > 0.5).nonzero().flatten().tolist())  # CLEAN: eager read right after the call
        return found


class CompiledTrainer(Trainer):
    def __init__(self, model, lr=2e-3, mode="reduce-overhead"):
        super().__init__(model, lr)
        self.train_step = torch.compile(self.train_step, mode=mode)
        self.predict = torch.compile(self.predict, mode=mode)
        self.opt_step = torch.compile(self.opt.step, mode=mode)


if __name__ == "__main__":
    loader = [(torch.rand(64, 3, 384, 384, device="cuda"), (torch.rand(64, N_INGR, device="cuda") < 0.05).float())
              for _ in range(100)]
    trainer = CompiledTrainer(FridgeNet())
    trainer.run("train", loader, epochs=30)
    user_photos = [torch.rand(3, int(h), int(w), device="cuda")
                   for h, w in torch.randint(480, 1600, (50, 2)).tolist()]
    print(trainer.run("serve", user_photos)[:2])
    print(trainer.run("serve_resized", user_photos)[:2])
