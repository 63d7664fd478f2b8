"""SimCLR (Chen et al. 2020) on CIFAR-10 -- single-file pretraining experiment for the cluster.

ResNet-18 with a CIFAR stem + 2-layer projection head, NT-Xent (tau = 0.5), SGD with cosine
decay, augmentations on the GPU.  Forward, loss and optimizer step use mode="max-autotune".
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
import torchvision.transforms.v2 as T

EPOCHS, BATCH, TEMP, LR = 200, 512, 0.5, 0.6
MEAN = torch.tensor([0.4914, 0.4822, 0.4465]).view(1, 3, 1, 1)
STD = torch.tensor([0.2470, 0.2435, 0.2616]).view(1, 3, 1, 1)


class SimCLR(nn.Module):
    def __init__(self, dim=128):
        super().__init__()
        r = torchvision.models.resnet18(num_classes=10)
        r.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        r.maxpool, r.fc = nn.Identity(), nn.Identity()
        self.backbone = r
        self.proj = nn.Sequential(nn.Linear(512, 512), nn.ReLU(inplace=True), nn.Linear(512, dim))

    def forward(self, x):
        h = self.backbone(x)
        z = self.proj(h)
        print("feature norm", h.norm(dim=1).mean())  # HAZARD: host-code
        return h, z


def _normalize_(x, mean, std):
    return x.sub_(mean).div_(std)  # HAZARD: static-address


def nt_xent(z1, z2, temperature=TEMP):
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    n = z1.shape[0]
    sim = z @ z.T / temperature
    pos = torch.cat([torch.diag(sim, n), torch.diag(sim, -n)])  # CLEAN: positives from fixed-size diagonals, not a mask
    self_mask = torch.eye(2 * n, dtype=torch.bool, device=z.device)
    neg = sim[~self_mask].view(2 * n, 2 * n - 1)  # HAZARD: dynamic-shape
    return -(pos - torch.logsumexp(neg, dim=1)).mean()


normalize_ = torch.compile(_normalize_, mode="max-autotune")
loss_fn = torch.compile(nt_xent, mode="max-autotune")
augment = nn.Sequential(T.RandomResizedCrop(32, scale=(0.2, 1.0), antialias=True), T.RandomHorizontalFlip(),
                        T.RandomApply([T.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8), T.RandomGrayscale(p=0.2))


def linear_probe(model, train_loader, test_loader, epochs=10):
    feats = torch.compile(model.backbone, mode="max-autotune-no-cudagraphs")  # CLEAN: no-cudagraphs twin, ragged last test batch is fine
    probe = nn.Linear(512, 10).cuda()
    opt = torch.optim.Adam(probe.parameters(), lr=1e-3)
    mean, std = MEAN.cuda(), STD.cuda()
    for _ in range(epochs):
        for x, y in train_loader:
            with torch.no_grad():
                h = feats((x.cuda() - mean) / std)
            loss = F.cross_entropy(probe(h), y.cuda())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    correct = 0
    with torch.no_grad():
        for x, y in test_loader:
            correct += (probe(feats((x.cuda() - mean) / std)).argmax(1).cpu() == y).sum().item()
    return correct / len(test_loader.dataset)


def main():
    tf = T.Compose([T.ToImage(), T.ToDtype(torch.float32, scale=True)])
    data = torchvision.datasets.CIFAR10("data", train=True, download=True, transform=tf)
    test = torchvision.datasets.CIFAR10("data", train=False, download=True, transform=tf)
    loader = torch.utils.data.DataLoader(data, BATCH, shuffle=True, drop_last=True, num_workers=8, pin_memory=True)
    model = SimCLR().cuda()
    model.forward = torch.compile(model.forward, mode="max-autotune")
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9, weight_decay=1e-6)
    opt_step = torch.compile(opt.step, mode="max-autotune")
    mean, std = MEAN.cuda(), STD.cuda()
    total = EPOCHS * len(loader)
    for epoch in range(EPOCHS):
        for i, (x, _) in enumerate(loader):
            x = x.cuda(non_blocking=True)
            _, z1 = model(normalize_(augment(x), mean, std))
            _, z2 = model(normalize_(augment(x), mean, std))
            loss = loss_fn(z1, z2)  # CLEAN: z1 read after the second forward, but in training with the backward still pending
            if i % 50 == 0:
                print(f"epoch {epoch} it {i} loss {loss.item():.4f}")  # CLEAN: loss read before backward and before the compiled opt.step
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt_step()
            lr = LR * 0.5 * (1 + math.cos(math.pi * (epoch * len(loader) + i) / total))
            for g in opt.param_groups:
                g["lr"] = lr  # HAZARD: optimizer
        if epoch % 50 == 49:
            probe_loader = torch.utils.data.DataLoader(data, 1024, shuffle=True, num_workers=8)
            print("linear probe acc", linear_probe(model, probe_loader, torch.utils.data.DataLoader(test, 1024)))


if __name__ == "__main__":
    main()
