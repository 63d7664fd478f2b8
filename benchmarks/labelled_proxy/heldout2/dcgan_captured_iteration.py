"""DCGAN whose whole discriminator + generator iteration is captured in one graph."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GANTrainer:
    def __init__(self, G: nn.Module, D: nn.Module, batch=128, zdim=100, r1_every=16, r1_gamma=10.0):
        self.G, self.D = G.cuda(), D.cuda()
        self.zdim, self.r1_every, self.r1_gamma = zdim, r1_every, r1_gamma
        self.opt_d = torch.optim.Adam(self.D.parameters(), lr=2e-4, betas=(0.5, 0.999), capturable=True)
        self.opt_g = torch.optim.Adam(self.G.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.real = torch.empty(batch, 3, 64, 64, device="cuda")
        self.real_label = 0.9
        self.iteration = 0
        self.graph = torch.cuda.CUDAGraph()
        self.stream = torch.cuda.Stream()
        self.d_hist = []

    def _iteration(self):
        torch.manual_seed(self.iteration)  # HAZARD: rng
        z = torch.randn(self.real.shape[0], self.zdim, 1, 1, device="cuda")  # CLEAN: default CUDA generator is graph-safe
        fake = self.G(z)
        self.opt_d.zero_grad(set_to_none=False)
        real = self.real.requires_grad_(True)
        d_real = self.D(real).view(-1)
        d_loss = F.binary_cross_entropy_with_logits(d_real, torch.full_like(d_real, self.real_label))  # CLEAN: label value never changes
        d_loss = d_loss + F.softplus(self.D(fake.detach()).view(-1)).mean()
        if self.iteration % self.r1_every == 0:  # HAZARD: dynamic-control-flow
            grad, = torch.autograd.grad(d_real.sum(), real, create_graph=True)
            d_loss = d_loss + self.r1_gamma * 0.5 * grad.pow(2).flatten(1).sum(1).mean()
        d_loss.backward()
        self.opt_d.step()  # CLEAN: capturable Adam
        self.opt_g.zero_grad(set_to_none=False)
        g_loss = F.softplus(-self.D(fake).view(-1)).mean()
        g_loss.backward()
        self.opt_g.step()  # HAZARD: optimizer
        self.d_hist.append(d_loss.item())  # HAZARD: host-sync
        return d_loss.detach(), g_loss.detach()

    def build(self, first_batch):
        self.real.copy_(first_batch)
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            for _ in range(3):
                self._iteration()
                self.iteration += 1
        torch.cuda.current_stream().wait_stream(self.stream)
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            with torch.cuda.graph(self.graph, stream=self.stream):
                self.static_losses = self._iteration()

    def fit(self, loader):
        for i, (x, _) in enumerate(loader):
            if i == 0:
                self.build(x.cuda())
            self.real.copy_(x, non_blocking=True)
            self.iteration += 1
            self.graph.replay()
            if i % 500 == 0:
                d, g = self.static_losses
                print(f"it {i} D {d.item():.3f} G {g.item():.3f}")
