# Capturing a model with my masked BatchNorm (a stripped-down copy of the
# SyncBatchNorm forward, single process, shards emulated with view()) fails:
#
#   RuntimeError: CUDA error: operation not permitted when stream is capturing
#   ... count_all = count_all[mask] ... nonzero_cuda_out_impl ... memcpy_and_sync
#
# Same traceback shape as pytorch/pytorch#78549. Which lines do I have to
# rewrite? torch 2.11 / H200.
import torch
import torch.nn as nn


class MaskedBatchNorm1d(nn.Module):
    def __init__(self, c, n_shards=4, momentum=0.1, eps=1e-5):
        super().__init__()
        self.n_shards, self.momentum, self.eps = n_shards, momentum, eps
        self.weight = nn.Parameter(torch.ones(c))
        self.bias = nn.Parameter(torch.zeros(c))
        self.register_buffer("running_mean", torch.zeros(c))
        self.register_buffer("running_var", torch.ones(c))

    def forward(self, x, valid):
        x = x.clone()
        x[~valid] = 0.0  # CLEAN: bool-mask assignment of a scalar (masked_fill path)
        sx = x.view(self.n_shards, -1, x.shape[-1]).sum(1)
        count_all = valid.view(self.n_shards, -1).float().sum(1)
        mask = count_all > 0
        count_all = count_all[mask]  # HAZARD: dynamic-shape
        if (count_all < 2).any():  # HAZARD: dynamic-control-flow
            count_all = count_all.clamp(min=2)
        n_world = torch.tensor([self.n_shards], device=x.device, dtype=x.dtype)  # HAZARD: host-sync
        total = count_all.sum()
        mean = sx.sum(0) / total
        var = (((x - mean) ** 2) * valid.unsqueeze(1)).sum(0) / total
        var = var * n_world / n_world.clamp(min=1)
        with torch.no_grad():
            self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)  # CLEAN: in-place buffer update
            self.running_var.mul_(1 - self.momentum).add_(self.momentum * var)
        y = (x - mean) * torch.rsqrt(var + self.eps) * self.weight + self.bias
        return torch.where(valid.unsqueeze(1), y, torch.zeros_like(y))  # CLEAN: where, no data-dependent shape


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.bn = MaskedBatchNorm1d(128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x, valid):
        return self.fc2(torch.relu(self.bn(self.fc1(x), valid)))


dev = "cuda"
net = Net().to(dev)
static_x = torch.randn(256, 64, device=dev)
static_valid = torch.rand(256, device=dev) > 0.1

with torch.no_grad():
    for _ in range(3):
        net(static_x, static_valid)  # eager warm-up
    torch.cuda.synchronize()  # CLEAN: sync before the capture starts, not inside it

    g = torch.cuda.CUDAGraph()
    g.capture_begin()  # HAZARD: stream
    static_y = net(static_x, static_valid)
    g.capture_end()

for step in range(5):
    static_x.copy_(torch.randn(256, 64, device=dev))
    static_valid.copy_(torch.rand(256, device=dev) > 0.1)
    g.replay()
    print(step, static_y.float().abs().mean().item())
