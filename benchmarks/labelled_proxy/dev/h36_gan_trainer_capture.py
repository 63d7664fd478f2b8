"""GAN trainer with a capture_step() that graphs the whole G/D update."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Generator(nn.Module):
    def __init__(self, zdim=128, out=784):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(zdim, 512), nn.LeakyReLU(0.2), nn.Linear(512, out), nn.Tanh())

    def forward(self, z):
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self, inp=784):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(inp, 512), nn.LeakyReLU(0.2), nn.Linear(512, 1))

    def forward(self, x):
        return self.net(x)


class GANTrainer:
    def __init__(self, bs=256, zdim=128, d_every=2):
        self.G, self.D = Generator(zdim).cuda(), Discriminator().cuda()
        self.opt_g = torch.optim.Adam(self.G.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.opt_d = torch.optim.RMSprop(self.D.parameters(), lr=5e-5)
        self.bs, self.zdim, self.d_every = bs, zdim, d_every
        self.real = torch.zeros(bs, 784, device="cuda")
        self.global_step = 0
        self.graph = None

    def train_step(self):
        z = torch.randn(self.bs, self.zdim, device="cuda")  # CLEAN: default CUDA generator is graph-safe
        fake = self.G(z)
        if self.global_step % self.d_every == 0:  # HAZARD: python-scalar
            d_loss = F.softplus(self.D(fake.detach())).mean() + F.softplus(-self.D(self.real)).mean()
            self.opt_d.zero_grad(set_to_none=False)
            d_loss.backward()
            self.opt_d.step()  # HAZARD: optimizer
        g_loss = F.softplus(-self.D(fake)).mean()
        self.opt_g.zero_grad(set_to_none=False)
        g_loss.backward()
        self.opt_g.step()  # HAZARD: optimizer
        return g_loss

    def capture_step(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.train_step()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.g_loss = self.train_step()

    def fit(self, loader):
        for real in loader:
            self.real.copy_(real.view(self.bs, -1))
            if self.graph is None:
                self.capture_step()
            self.graph.replay()
            self.global_step += 1
