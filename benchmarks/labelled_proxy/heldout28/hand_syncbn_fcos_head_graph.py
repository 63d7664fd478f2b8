"""FCOS-style detector trained on 8 GPUs at a small per-GPU batch, so batch norm statistics
are synchronised by hand (one all-reduce of sum / sum-of-squares / count). Padded pixels of
letterboxed images are masked out. The whole training step is one CUDA graph."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class MaskedSyncBN(nn.Module):
    def __init__(self, c, momentum=0.1, eps=1e-5):
        super().__init__()
        self.momentum, self.eps = momentum, eps
        self.weight, self.bias = nn.Parameter(torch.ones(c)), nn.Parameter(torch.zeros(c))
        self.register_buffer("running_mean", torch.zeros(c))
        self.register_buffer("running_var", torch.ones(c))
        self.valid = None  # (N, 1, H, W) padding mask, bound by the trainer

    def forward(self, x):
        if not self.training:
            return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0, self.eps)
        m = F.interpolate(self.valid, size=x.shape[-2:], mode="nearest")
        stats = torch.cat([(x * m).sum((0, 2, 3)), (x * x * m).sum((0, 2, 3)), m.sum()[None]])
        dist.all_reduce(stats)
        c = x.shape[1]
        n = stats[-1].clamp_min(1.0)  # CLEAN: the count stays a device tensor
        mean = stats[:c] / n
        var = stats[c:2 * c] / n - mean * mean
        if (var < 0).any():  # HAZARD: dynamic-control-flow
            var = var.clamp_min(0.0)
        count = int(stats[-1])  # HAZARD: host-sync
        unbiased = var * (count / max(count - 1, 1))
        mom = self.momentum  # HAZARD: python-scalar
        with torch.no_grad():
            self.running_mean.mul_(1 - mom).add_(mom * mean)  # CLEAN: in-place update of a registered buffer
            self.running_var.mul_(1 - mom).add_(mom * unbiased)
        y = (x - mean[None, :, None, None]) * torch.rsqrt(var + self.eps)[None, :, None, None]
        return y * self.weight[None, :, None, None] + self.bias[None, :, None, None]


def conv_bn(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), MaskedSyncBN(cout), nn.ReLU(inplace=True))


class FCOSTrainer:
    def __init__(self, backbone, head, batch=4, size=(800, 1024)):
        self.backbone, self.head = backbone, head
        self.bns = [m for m in list(backbone.modules()) + list(head.modules()) if isinstance(m, MaskedSyncBN)]
        self.img = torch.zeros(batch, 3, *size, device="cuda")
        self.valid = torch.zeros(batch, 1, *size, device="cuda")
        self.targets = torch.zeros(batch, 5, size[0] // 8, size[1] // 8, device="cuda")
        for bn in self.bns:
            bn.valid = self.valid
        params = list(backbone.parameters()) + list(head.parameters())
        self.opt = torch.optim.SGD(params, lr=0.01, momentum=0.9, weight_decay=1e-4)
        self.graph = torch.cuda.CUDAGraph()

    def _step(self):
        cls, box = self.head(self.backbone(self.img))
        loss = F.binary_cross_entropy_with_logits(cls, self.targets[:, :1]) + F.l1_loss(box, self.targets[:, 1:])
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=False)
        return loss.detach()

    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            with torch.cuda.stream(side):
                for _ in range(3):
                    self._step()
            torch.cuda.current_stream().wait_stream(side)
            with torch.cuda.graph(self.graph, stream=torch.cuda.current_stream()):  # HAZARD: stream
                self.static_loss = self._step()

    def fit(self, loader, epochs):
        for ep in range(epochs):
            for bn in self.bns:
                bn.momentum = 0.1 if ep < epochs - 2 else 0.01
            for img, valid, tgt in loader:
                self.img.copy_(img)  # CLEAN: in-place copy into the captured input
                self.valid.copy_(valid)
                self.targets.copy_(tgt)
                self.graph.replay()
