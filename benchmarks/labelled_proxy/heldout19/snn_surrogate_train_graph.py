"""Spiking neural net on MNIST (leaky integrate-and-fire, fast-sigmoid surrogate gradient),
written after the snnTorch tutorials but in plain PyTorch.

The whole training step is captured as a CUDA graph; a curriculum lengthens the simulation
window every three epochs.  Spike counts are copied to a logging stream for the raster plot.
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

BATCH = 128
BETA = 0.95

class FastSigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, mem, slope=25.0):
        ctx.save_for_backward(mem)
        ctx.slope = slope
        return (mem > 0).float()

    @staticmethod
    def backward(ctx, grad):
        (mem,) = ctx.saved_tensors
        return grad / (ctx.slope * mem.abs() + 1.0) ** 2, None

spike_fn = FastSigmoid.apply

class SNN(nn.Module):
    def __init__(self, num_steps=25):
        super().__init__()
        self.fc1 = nn.Linear(784, 1000)
        self.fc2 = nn.Linear(1000, 10)
        self.num_steps = num_steps

    def forward(self, x):
        T = self.num_steps  # HAZARD: python-scalar
        mem1 = torch.zeros(x.shape[0], 1000, device=x.device)
        mem2 = torch.zeros(x.shape[0], 10, device=x.device)
        drop_t = random.randrange(T)  # HAZARD: host-code
        spk_rec, mem_rec = [], []
        for t in range(T):
            inp = (torch.rand_like(x) < x).float()  # CLEAN: rate coding with the default CUDA generator
            if t == drop_t:                          # temporal dropout of one input frame
                inp = torch.zeros_like(inp)
            mem1 = BETA * mem1 + self.fc1(inp)
            spk1 = spike_fn(mem1 - 1.0)
            mem1 = mem1 - spk1
            mem2 = BETA * mem2 + self.fc2(spk1)
            spk2 = spike_fn(mem2 - 1.0)
            mem2 = mem2 - spk2
            spk_rec.append(spk2)
            mem_rec.append(mem2)
        return torch.stack(spk_rec), torch.stack(mem_rec)

class Trainer:
    def __init__(self, model):
        self.model = model.cuda()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=5e-4, betas=(0.9, 0.999))
        self.x = torch.zeros(BATCH, 784, device="cuda")
        self.y = torch.zeros(BATCH, dtype=torch.long, device="cuda")
        self.raster = torch.zeros(BATCH, 10, device="cuda")
        self.log_stream = torch.cuda.Stream()
        self.graph = None

    def _step(self):
        self.opt.zero_grad(set_to_none=True)
        spk, mem = self.model(self.x)
        loss = sum(F.cross_entropy(mem[t], self.y) for t in range(mem.shape[0]))
        loss.backward()
        self.opt.step()  # HAZARD: optimizer
        with torch.cuda.stream(self.log_stream):  # HAZARD: stream
            self.raster.copy_(spk.sum(0).detach())
        return loss.detach()

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_loss = self._step()

    def fit(self, loader, epochs=10):
        for epoch in range(epochs):
            self.model.num_steps = 25 + 5 * (epoch // 3)
            for data, target in loader:
                self.x.copy_(data.view(BATCH, -1), non_blocking=True)  # CLEAN: copy_ from pinned loader memory into the static input
                self.y.copy_(target, non_blocking=True)
                if self.graph is None:
                    self.capture()
                self.graph.replay()
            acc = (self.raster.argmax(1) == self.y).float().mean().item()  # CLEAN: host read after the replay
            print(f"epoch {epoch}  loss {self.static_loss.item():.3f}  acc {acc:.3f}  T={self.model.num_steps}")

if __name__ == "__main__":
    mnist = datasets.MNIST("data", train=True, download=True,
                           transform=transforms.Compose([transforms.ToTensor()]))
    loader = DataLoader(mnist, batch_size=BATCH, shuffle=True, drop_last=True, pin_memory=True, num_workers=4)
    Trainer(SNN()).fit(loader)
