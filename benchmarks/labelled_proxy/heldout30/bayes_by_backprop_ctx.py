# Bayes by Backprop (Blundell et al. 2015) on MNIST, from a 2017 blog-post implementation. Training is
# sped up with a small `captured()` context manager used by several of our older research scripts.
import contextlib
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

PI, SIGMA_1, SIGMA_2 = 0.5, math.exp(-0), math.exp(-6)


@contextlib.contextmanager
def captured(graph, warmup_fn=None, n_warmup=3):
    if warmup_fn is not None:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(n_warmup):
                warmup_fn()
        torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(graph, stream=torch.cuda.current_stream()):  # HAZARD: stream
        yield graph


class BayesianLinear(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.w_mu = nn.Parameter(torch.Tensor(n_out, n_in).uniform_(-0.2, 0.2))
        self.w_rho = nn.Parameter(torch.Tensor(n_out, n_in).uniform_(-5, -4))
        self.b_mu = nn.Parameter(torch.Tensor(n_out).uniform_(-0.2, 0.2))
        self.b_rho = nn.Parameter(torch.Tensor(n_out).uniform_(-5, -4))

    def log_prior(self, w):
        sigma = torch.FloatTensor([SIGMA_1, SIGMA_2]).cuda()  # HAZARD: pinned-memory
        p1 = torch.exp(-w ** 2 / (2 * sigma[0] ** 2)) / sigma[0]
        p2 = torch.exp(-w ** 2 / (2 * sigma[1] ** 2)) / sigma[1]
        return torch.log(PI * p1 + (1 - PI) * p2 + 1e-12).sum()

    def forward(self, x):
        w_sigma, b_sigma = torch.log1p(torch.exp(self.w_rho)), torch.log1p(torch.exp(self.b_rho))
        w = self.w_mu + w_sigma * torch.randn_like(self.w_mu)  # CLEAN: reparameterisation noise from the default CUDA generator
        b = self.b_mu + b_sigma * torch.cuda.FloatTensor(self.b_mu.size()).normal_()  # CLEAN: legacy size constructor on the device, default generator
        self.log_q = (-0.5 * ((w - self.w_mu) / w_sigma) ** 2 - torch.log(w_sigma)).sum()
        self.log_p = self.log_prior(w) + self.log_prior(b)
        return F.linear(x, w, b)


class BayesianNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2, self.l3 = BayesianLinear(784, 400), BayesianLinear(400, 400), BayesianLinear(400, 10)

    def forward(self, x):
        return F.log_softmax(self.l3(F.relu(self.l2(F.relu(self.l1(x.view(-1, 784)))))), dim=1)

    def elbo(self, x, y, kl_weight, samples=2):
        nll = kl = 0.0
        for _ in range(samples):
            out = self(x)
            nll = nll + F.nll_loss(out, y, reduction="sum")
            kl = kl + sum(l.log_q - l.log_p for l in (self.l1, self.l2, self.l3))
        return (kl * kl_weight + nll) / samples


class BBBTrainer:
    def __init__(self, n_batches=469, batch=128):
        self.net = BayesianNetwork().cuda()
        self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-3, capturable=True)
        self.M, self.batch_idx = n_batches, 0
        self.x = torch.zeros(batch, 1, 28, 28, device="cuda")
        self.y = torch.zeros(batch, dtype=torch.long, device="cuda")

    def step(self):
        kl_weight = 2 ** (self.M - self.batch_idx - 1) / (2 ** self.M - 1)  # HAZARD: python-scalar
        self.opt.zero_grad(set_to_none=False)
        self.loss = self.net.elbo(self.x, self.y, kl_weight)
        self.loss.backward()
        self.opt.step()  # CLEAN: Adam built with capturable=True
        self.batch_idx += 1  # HAZARD: host-code

    def fit(self, loader, epochs=10):
        self.graph = torch.cuda.CUDAGraph()
        with captured(self.graph, warmup_fn=self.step):
            self.step()
        for epoch in range(epochs):
            for self.batch_idx, (x, y) in enumerate(loader):
                self.x.copy_(x)  # CLEAN: copy_ into the static batch
                self.y.copy_(y)
                self.graph.replay()
            print("epoch", epoch, "elbo loss", self.loss.item())  # CLEAN: after the replays, outside the capture
