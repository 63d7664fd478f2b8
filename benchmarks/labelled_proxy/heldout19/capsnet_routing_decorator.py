"""CapsNet (Sabour, Frosst & Hinton 2017) on MNIST -- inference backend for the lab demo page.

PrimaryCaps -> DigitCaps with dynamic routing, as in the popular blog implementations.  The
`classify` method is wrapped in a small capture-on-first-call decorator: warm-up on a side
stream, capture, then replay for every later call with the same input shape.
"""
import functools
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def cuda_graphed(warmup=3):
    def deco(method):
        @functools.wraps(method)
        def wrapper(self, x):
            key = (method.__name__, tuple(x.shape))
            cache = self.__dict__.setdefault("_graphs", {})
            if key not in cache:
                static_x = x.clone()
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):  # CLEAN: warm-up on a forked side stream, joined right below
                    for _ in range(warmup):
                        method(self, static_x)
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    static_out = method(self, static_x)
                cache[key] = (g, static_x, static_out)
            g, static_x, static_out = cache[key]
            static_x.copy_(x)  # CLEAN: copy_ into the captured input
            g.replay()
            return static_out
        return wrapper
    return deco


def squash(s, dim=-1):
    n2 = (s ** 2).sum(dim, keepdim=True)
    return n2 / (1 + n2) * s / torch.sqrt(n2 + 1e-8)


class CapsNet(nn.Module):
    def __init__(self, routing_iters=3):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 256, 9)
        self.primary = nn.Conv2d(256, 32 * 8, 9, stride=2)
        self.W = nn.Parameter(0.01 * torch.randn(1, 32 * 6 * 6, 10, 16, 8))
        self.register_buffer("n_calls", torch.zeros((), dtype=torch.long))
        self.routing_iters = routing_iters
        self.route_ms = 0.0

    def set_routing_iters(self, n):
        self.routing_iters = n

    def route(self, u_hat):
        b = torch.zeros(u_hat.shape[:3], device=u_hat.device)           # B x 1152 x 10
        n_iter = self.routing_iters  # HAZARD: python-scalar
        for i in range(n_iter):
            c = F.softmax(b, dim=2)
            v = squash((c.unsqueeze(-1) * u_hat).sum(1, keepdim=True))    # B x 1 x 10 x 16
            if i < n_iter - 1:
                delta = (u_hat * v).sum(-1)
                if delta.abs().max() < 1e-3:  # HAZARD: dynamic-control-flow
                    break
                b = b + delta
        return v.squeeze(1)

    @cuda_graphed()
    @torch.no_grad()
    def classify(self, x):
        t0 = time.perf_counter()  # HAZARD: host-code
        h = F.relu(self.conv1(x))
        u = self.primary(h).view(x.shape[0], 32, 8, 6, 6).permute(0, 1, 3, 4, 2).reshape(x.shape[0], -1, 8)
        u_hat = (self.W @ squash(u)[:, :, None, :, None]).squeeze(-1)   # B x 1152 x 10 x 16
        v = self.route(u_hat)
        self.n_calls.add_(1)  # CLEAN: device-side counter, advanced by every replay
        self.route_ms = (time.perf_counter() - t0) * 1e3
        return v.norm(dim=-1)


if __name__ == "__main__":
    from torchvision import datasets, transforms

    net = CapsNet().cuda().eval()
    net.load_state_dict(torch.load("capsnet_mnist.pt", map_location="cuda"))
    test = datasets.MNIST(".", train=False, download=True, transform=transforms.ToTensor())
    loader = torch.utils.data.DataLoader(test, batch_size=100, pin_memory=True)
    lengths, labels = [], []
    for i, (x, y) in enumerate(loader):
        if i == 50:
            net.set_routing_iters(1)                   # "fast mode" for the second half of the demo
        lengths.append(net.classify(x.cuda(non_blocking=True)))  # HAZARD: static-address
        labels.append(y)
    acc = (torch.cat(lengths).argmax(1).cpu() == torch.cat(labels)).float().mean().item()
    print(f"acc {acc:.4f}  calls {int(net.n_calls)}  routing {net.route_ms:.2f} ms")  # CLEAN: host read of the device counter after the replays
