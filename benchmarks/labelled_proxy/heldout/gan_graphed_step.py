import random

import torch
import torch.nn as nn
import torch.nn.functional as F

Z_DIM = 128


def build(device="cuda"):
    G = nn.Sequential(nn.Linear(Z_DIM, 256), nn.ReLU(), nn.Linear(256, 784), nn.Tanh()).to(device)
    D = nn.Sequential(nn.Linear(784, 256), nn.LeakyReLU(0.2), nn.Linear(256, 1)).to(device)
    return G, D


class GraphedGANStep:
    """Whole D+G update captured once and replayed for every batch."""

    def __init__(self, G, D, batch_size=64, label_smoothing=0.9, device="cuda"):
        self.G, self.D = G, D
        self.opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999), capturable=True)
        self.opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.sched_g = torch.optim.lr_scheduler.StepLR(self.opt_g, step_size=2000, gamma=0.5)
        self.batch_size = batch_size
        self.smooth = label_smoothing
        self.real = torch.empty(batch_size, 784, device=device)
        self.graph = torch.cuda.CUDAGraph()
        self.loss_d = self.loss_g = None

    def _step(self):
        torch.manual_seed(1234)  # HAZARD: rng
        z = torch.randn(self.batch_size, Z_DIM, device=self.real.device)
        flip_labels = random.random() < 0.05  # HAZARD: host-code
        real_target = torch.full((self.batch_size, 1), self.smooth, device=z.device)  # CLEAN: smoothing constant fixed at construction, never changed
        if flip_labels:
            real_target = 1.0 - real_target

        self.opt_d.zero_grad(set_to_none=False)
        fake = self.G(z)
        d_real, d_fake = self.D(self.real), self.D(fake.detach())
        loss_d = F.binary_cross_entropy_with_logits(d_real, real_target) + \
            F.binary_cross_entropy_with_logits(d_fake, torch.zeros_like(d_fake))
        loss_d.backward()
        self.opt_d.step()  # HAZARD: optimizer

        self.opt_g.zero_grad(set_to_none=False)
        loss_g = F.binary_cross_entropy_with_logits(self.D(fake), torch.ones_like(d_fake))
        loss_g.backward()
        self.opt_g.step()  # CLEAN: generator optimizer was built with capturable=True
        return loss_d.detach(), loss_g.detach()

    def capture(self, warmup=3):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(warmup):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self.loss_d, self.loss_g = self._step()

    def __call__(self, real_batch):
        self.real.copy_(real_batch)
        self.graph.replay()
        return self.loss_d, self.loss_g


def train(loader, epochs=5):
    G, D = build()
    step = GraphedGANStep(G, D)
    step.capture()
    for epoch in range(epochs):
        for i, (x, _) in enumerate(loader):
            ld, lg = step(x.view(x.size(0), -1).cuda(non_blocking=True))
            step.sched_g.step()  # HAZARD: python-scalar
            if i % 200 == 0:
                print(f"epoch {epoch} it {i} d={ld.item():.3f} g={lg.item():.3f}")  # CLEAN: .item() after replay, outside the region
    return G


if __name__ == "__main__":
    from torch.utils.data import DataLoader, TensorDataset

    data = TensorDataset(torch.rand(6400, 1, 28, 28) * 2 - 1, torch.zeros(6400))
    train(DataLoader(data, batch_size=64, shuffle=True, drop_last=True, pin_memory=True))
