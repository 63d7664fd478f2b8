"""Deep Equilibrium model (Bai, Kolter & Koltun 2019), following the NeurIPS 2020 "Deep Implicit
Layers" tutorial, chapter 4 (forward iteration solver, ResNet-style cell).

Serving the trained CIFAR-10 DEQ: the forward fixed-point solve is captured as a CUDA graph;
the relative residual of every batch goes into a ring buffer for monitoring.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("deq")

class ResNetLayer(nn.Module):
    def __init__(self, n_channels, n_inner_channels, kernel_size=3, num_groups=8):
        super().__init__()
        self.conv1 = nn.Conv2d(n_channels, n_inner_channels, kernel_size, padding=kernel_size // 2, bias=False)
        self.conv2 = nn.Conv2d(n_inner_channels, n_channels, kernel_size, padding=kernel_size // 2, bias=False)
        self.norm1 = nn.GroupNorm(num_groups, n_inner_channels)
        self.norm2 = nn.GroupNorm(num_groups, n_channels)
        self.norm3 = nn.GroupNorm(num_groups, n_channels)
        self.conv1.weight.data.normal_(0, 0.01)
        self.conv2.weight.data.normal_(0, 0.01)

    def forward(self, z, x):
        y = self.norm1(F.relu(self.conv1(z)))
        return self.norm3(F.relu(z + self.norm2(x + self.conv2(y))))

def forward_iteration(f, x0, max_iter=50, tol=1e-2):
    f0 = f(x0)
    for k in range(max_iter):
        x = f0
        f0 = f(x)
        rel = (f0 - x).norm() / (1e-5 + f0.norm())
        if rel < tol:  # HAZARD: dynamic-control-flow
            break
    log.debug(f"fixed point after {k + 1} iterations, rel. residual {rel:.2e}")  # HAZARD: host-sync
    return f0, rel

class DEQFixedPoint(nn.Module):
    def __init__(self, f, **kwargs):
        super().__init__()
        self.f = f
        self.kwargs = kwargs
        self.forward_res = None

    def forward(self, x):
        with torch.no_grad():
            z, self.forward_res = forward_iteration(lambda z: self.f(z, x), torch.zeros_like(x), **self.kwargs)
        return self.f(z, x)

def build(chan=48):
    f = ResNetLayer(chan, 64, kernel_size=3)
    return nn.Sequential(nn.Conv2d(3, chan, 3, bias=True, padding=1), nn.BatchNorm2d(chan),
                         DEQFixedPoint(f, tol=1e-2, max_iter=25), nn.BatchNorm2d(chan),
                         nn.AvgPool2d(8, 8), nn.Flatten(), nn.Linear(chan * 4 * 4, 10))

class DEQServer:
    def __init__(self, model, batch=256):
        self.model = model.cuda().eval()
        self.deq = model[2]
        self.x = torch.zeros(batch, 3, 32, 32, device="cuda")
        self.res_hist = torch.zeros(1024, device="cuda")
        self.n = torch.zeros((), dtype=torch.long, device="cuda")
        self.aux = torch.cuda.Stream()
        self.graph = torch.cuda.CUDAGraph()

    def _infer(self):
        logits = self.model(self.x)
        self.aux.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.aux):  # HAZARD: stream
            self.res_hist.index_copy_(0, (self.n % 1024).view(1), self.deq.forward_res.view(1))
            self.n.add_(1)
        return logits

    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            with torch.cuda.stream(s):  # CLEAN: forked before and joined after the warm-up, outside the capture
                for _ in range(3):
                    self._infer()
            torch.cuda.current_stream().wait_stream(s)
            with torch.cuda.graph(self.graph):
                self.logits = self._infer()

    def predict(self, images):
        self.x.copy_(images)  # CLEAN: copy_ into the static input
        self.graph.replay()
        return self.logits.argmax(1)

if __name__ == "__main__":
    import torchvision
    import torchvision.transforms as T

    model = build()
    model.load_state_dict(torch.load("deq_cifar10.pt", map_location="cpu"))
    server = DEQServer(model)
    server.capture()
    norm = T.Normalize((0.4914, 0.4822, 0.4465), (0.247, 0.243, 0.261))
    test = torchvision.datasets.CIFAR10("data", train=False, download=True, transform=T.Compose([T.ToTensor(), norm]))
    loader = torch.utils.data.DataLoader(test, batch_size=256, drop_last=True, pin_memory=True)
    correct = 0
    for xb, yb in loader:
        pred = server.predict(xb.cuda(non_blocking=True))
        correct += (pred.cpu() == yb).sum().item()  # CLEAN: host read after the replay
    print(f"test acc {correct / (len(loader) * 256):.4f}")
    print("mean residual", server.res_hist[:len(loader)].mean().item())
