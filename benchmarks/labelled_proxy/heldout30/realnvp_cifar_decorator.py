# RealNVP on CIFAR-10 (after the 2018 PyTorch reimplementation). Evaluation and sampling go through a
# small `cuda_graphed` decorator that captures the function on its first call and replays it afterwards.
import functools
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def cuda_graphed(fn):
    state = {}

    @functools.wraps(fn)
    def wrapper(*args):
        if "graph" not in state:
            state["args"] = [a.clone() for a in args]
            state["graph"] = torch.cuda.CUDAGraph()
            with torch.cuda.graph(state["graph"]):  # HAZARD: api-misuse
                state["out"] = fn(*state["args"])
        else:
            for static, a in zip(state["args"], args):
                static.copy_(a)  # CLEAN: copy_ into the captured inputs
        state["graph"].replay()
        return state["out"]
    return wrapper


class Coupling(nn.Module):
    def __init__(self, c, mid=64, parity=0):
        super().__init__()
        self.parity = parity
        self.net = nn.Sequential(nn.Conv2d(c, mid, 3, padding=1), nn.ReLU(), nn.Conv2d(mid, 2 * c, 3, padding=1))
        self.scale = nn.Parameter(torch.ones(1, c, 1, 1))

    def forward(self, x, sldj, reverse=False):
        mask = torch.ones_like(x[:1, :1])
        mask[..., self.parity::2, :] = 0
        st = self.net(x * mask)
        s, t = st.chunk(2, 1)
        s = self.scale * torch.tanh(s) * (1 - mask)
        t = t * (1 - mask)
        if reverse:  # CLEAN: Python flag, fixed for each captured function
            return (x - t) * torch.exp(-s), sldj
        return x * torch.exp(s) + t, sldj + s.flatten(1).sum(1)


class RealNVP(nn.Module):
    def __init__(self, c=3, n=6):
        super().__init__()
        self.couplings = nn.ModuleList([Coupling(c, parity=i % 2) for i in range(n)])
        self.data_constraint = 0.9
        self.sample_seed = 1234

    def preprocess(self, x):
        y = (x * 255.0 + torch.rand_like(x)) / 256.0  # CLEAN: dequantisation noise from the default CUDA generator
        y = (2 * y - 1) * self.data_constraint
        y = ((y + 1) / 2).log() - (1 - (y + 1) / 2).log()
        c = np.log(1 - self.data_constraint) - np.log(self.data_constraint)
        ldj = F.softplus(y) + F.softplus(-y) - np.log1p(np.exp(c))
        return y, ldj.flatten(1).sum(1)


model = RealNVP().cuda().eval()


@cuda_graphed
@torch.no_grad()
def bits_per_dim(x):
    z, sldj = model.preprocess(x)
    for cpl in model.couplings:
        z, sldj = cpl(z, sldj)
    if torch.isnan(sldj).any():  # HAZARD: dynamic-control-flow
        sldj = torch.zeros_like(sldj)
    prior = -0.5 * (z ** 2 + np.log(2 * np.pi)).flatten(1).sum(1)
    return -(prior + sldj) / (np.log(2) * x[0].numel()) + 8


@cuda_graphed
@torch.no_grad()
def sample(z):
    torch.manual_seed(model.sample_seed)  # HAZARD: rng
    z = z + 0.01 * torch.randn_like(z)
    sldj = torch.zeros(z.size(0), device=z.device)
    for cpl in reversed(model.couplings):
        z, sldj = cpl(z, sldj, reverse=True)
    return torch.sigmoid(z)


def evaluate(loader, n_samples=64):
    bpds, samples = [], []
    for x, _ in loader:
        bpd = bits_per_dim(x.cuda())
        bpds.append(bpd)  # HAZARD: static-address
    for _ in range(4):
        model.sample_seed += 1
        samples.append(sample(torch.randn(n_samples, 3, 32, 32, device="cuda")).clone())  # CLEAN: cloned before the next replay
    return torch.cat(bpds).mean().item(), torch.cat(samples)
