"""PGD adversarial training on CIFAR-10 (Madry et al. 2018) -- one-file experiment.  Pre-act ResNet,
7-step L-inf PGD with random start, eps ramped over 5 epochs; net + projection use reduce-overhead."""
from dataclasses import dataclass
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
import torchvision.transforms as T

@dataclass(frozen=True)
class Cfg:
    eps: float = 8 / 255
    alpha: float = 2 / 255
    steps, ramp_epochs, epochs, batch = 7, 5, 30, 512

def block(cin, cout, stride):
    return nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(), nn.Conv2d(cout, cout, 3, 1, 1, bias=False))

class PreActNet(nn.Module):
    def __init__(self, w=64):
        super().__init__()
        self.stem = nn.Conv2d(3, w, 3, 1, 1, bias=False)
        self.b1, self.b2, self.b3 = block(w, w, 1), block(w, 2 * w, 2), block(2 * w, 4 * w, 2)
        self.s2, self.s3 = nn.Conv2d(w, 2 * w, 1, 2, bias=False), nn.Conv2d(2 * w, 4 * w, 1, 2, bias=False)
        self.fc = nn.Linear(4 * w, 10)
        self.register_buffer("mu", torch.tensor([0.4914, 0.4822, 0.4465]).view(1, 3, 1, 1))
        self.register_buffer("sd", torch.tensor([0.2471, 0.2435, 0.2616]).view(1, 3, 1, 1))

    def forward(self, x):
        x = self.stem((x - self.mu) / self.sd)
        x = x + self.b1(x)
        x = self.s2(x) + self.b2(x)
        x = self.s3(x) + self.b3(x)
        return self.fc(F.adaptive_avg_pool2d(F.relu(x), 1).flatten(1))

class PGDTrainer:
    def __init__(self, model, cfg):
        self.cfg, self.net = cfg, model.cuda()
        self.model = torch.compile(self.net, mode="reduce-overhead")
        self.eval_model = torch.compile(self.net, mode="max-autotune-no-cudagraphs")  # CLEAN: no CUDA graphs, ragged test batches are fine
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4, nesterov=True)
        self.eps = 0.0
        self._project = torch.compile(self._project_impl, mode="reduce-overhead")
        self._acc = torch.compile(self._acc_impl, mode="reduce-overhead")

    def _project_impl(self, x, delta, grad):
        eps = self.eps  # HAZARD: python-scalar
        if not torch.isfinite(grad).all():  # HAZARD: dynamic-control-flow
            grad = torch.nan_to_num(grad)
        delta = (delta + self.cfg.alpha * grad.sign()).clamp(-eps, eps)
        return torch.max(torch.min(delta, 1 - x), -x)  # CLEAN: box constraint with min/max on the device

    def _acc_impl(self, logits, y):
        return (logits.argmax(1) == y).float().mean().item()  # HAZARD: host-sync

    def attack(self, model, x, y):
        delta = torch.empty_like(x).uniform_(-self.eps, self.eps)
        for _ in range(self.cfg.steps):
            delta.requires_grad_(True)
            loss = F.cross_entropy(model(x + delta), y)
            grad, = torch.autograd.grad(loss, delta)
            delta = self._project(x, delta.detach(), grad.detach().clone())
            delta = delta.clone()  # CLEAN: projected delta cloned before the model runs again
        return delta.detach()

    def train_epoch(self, loader, epoch):
        self.net.train()
        for i, (x, y) in enumerate(loader):
            self.eps = self.cfg.eps * min(1.0, (epoch * len(loader) + i) / (self.cfg.ramp_epochs * len(loader)))
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            delta = self.attack(self.model, x, y)
            logits = self.model(x + delta)
            loss = F.cross_entropy(logits, y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            if i % 50 == 0:
                acc = self._acc(logits.detach().clone(), y)
                print(f"ep {epoch} it {i} loss {loss.item():.3f} adv-acc {acc:.3f} eps {self.eps * 255:.2f}/255")

    def evaluate(self, loader, robust_batches=10):
        self.net.eval()
        nat, rob, n_nat, n_rob = 0, 0, 0, 0
        for i, (x, y) in enumerate(loader):                 # 10000 test images, last batch is 272
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            with torch.no_grad():
                logits = self.model(x)  # HAZARD: dynamic-shape
            nat += (logits.argmax(1) == y).sum().item()
            n_nat += len(y)
            if i < robust_batches:
                delta = self.attack(self.eval_model, x, y)
                with torch.no_grad():
                    rob += (self.eval_model(x + delta).argmax(1) == y).sum().item()
                n_rob += len(y)
        return nat / n_nat, rob / n_rob

if __name__ == "__main__":
    cfg = Cfg()
    tf = T.Compose([T.RandomCrop(32, 4), T.RandomHorizontalFlip(), T.ToTensor()])
    train = torchvision.datasets.CIFAR10("data", train=True, download=True, transform=tf)
    test = torchvision.datasets.CIFAR10("data", train=False, download=True, transform=T.ToTensor())
    tl = torch.utils.data.DataLoader(train, cfg.batch, shuffle=True, drop_last=True, num_workers=8, pin_memory=True)
    vl = torch.utils.data.DataLoader(test, cfg.batch, num_workers=8, pin_memory=True)
    trainer = PGDTrainer(PreActNet(), cfg)
    for epoch in range(cfg.epochs):
        trainer.train_epoch(tl, epoch)
        print("natural / PGD-7 accuracy: %.4f / %.4f" % trainer.evaluate(vl))
