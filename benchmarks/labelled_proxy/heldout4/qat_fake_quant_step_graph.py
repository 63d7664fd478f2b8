"""Quantization-aware fine-tuning of a small CNN with the whole train step in a CUDA graph.

Activation observers keep running min/max on the device; after `freeze_after`
steps observers are switched off and only the weights keep training.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class FakeQuant(nn.Module):
    def __init__(self, momentum=0.01, qmin=0, qmax=255):
        super().__init__()
        self.momentum, self.qmin, self.qmax = momentum, qmin, qmax
        self.register_buffer("min_val", torch.zeros(()))
        self.register_buffer("max_val", torch.ones(()))
        self.register_buffer("scale", torch.ones(()))
        self.register_buffer("zero_point", torch.zeros((), dtype=torch.int32))
        self.observe = True

    def forward(self, x):
        if self.observe:  # HAZARD: python-scalar
            self.min_val.lerp_(x.detach().amin(), self.momentum)  # CLEAN: observer statistics are updated on the device
            self.max_val.lerp_(x.detach().amax(), self.momentum)
            self.scale.copy_((self.max_val - self.min_val).clamp_min(1e-8) / (self.qmax - self.qmin))
            self.zero_point.copy_((self.qmin - self.min_val / self.scale).round().clamp(self.qmin, self.qmax).int())
        return torch.fake_quantize_per_tensor_affine(x, self.scale, self.zero_point, self.qmin, self.qmax)  # CLEAN: qparams are device tensors, not host floats


class QConvNet(nn.Module):
    def __init__(self, n_classes=10):
        super().__init__()
        self.conv1, self.fq1 = nn.Conv2d(3, 32, 3, padding=1), FakeQuant()
        self.conv2, self.fq2 = nn.Conv2d(32, 64, 3, padding=1), FakeQuant()
        self.head = nn.Linear(64, n_classes)

    def forward(self, x):
        x = self.fq1(F.relu(self.conv1(x)))
        x = self.fq2(F.relu(self.conv2(F.max_pool2d(x, 2))))
        return self.head(x.mean((2, 3)))


class QATRunner:
    def __init__(self, model: QConvNet, batch=256, base_seed=17, freeze_after=2000):
        self.model = model.cuda().train()
        self.opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        self.x = torch.zeros(batch, 3, 32, 32, device="cuda")
        self.y = torch.zeros(batch, dtype=torch.long, device="cuda")
        self.base_seed, self.freeze_after, self.step = base_seed, freeze_after, 0
        self.graph = torch.cuda.CUDAGraph()
        self.loss = None

    def _train_step(self):
        torch.cuda.manual_seed(self.base_seed + self.step)  # HAZARD: rng
        noisy = self.x + 0.01 * torch.randn_like(self.x)
        loss = F.cross_entropy(self.model(noisy), self.y)
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.cuda.empty_cache()  # HAZARD: memory
        self.opt.step()  # CLEAN: SGD keeps no host-side step counter and its LR never changes here
        return loss.detach()

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._train_step()
                self.step += 1
        torch.cuda.current_stream().wait_stream(s)
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            with torch.cuda.graph(self.graph):
                self.loss = self._train_step()

    def fit(self, loader, epochs):
        self.capture()
        for _ in range(epochs):
            for xb, yb in loader:
                self.x.copy_(xb, non_blocking=True)
                self.y.copy_(yb, non_blocking=True)
                self.graph.replay()
                self.step += 1
                if self.step == self.freeze_after:
                    for m in self.model.modules():
                        if isinstance(m, FakeQuant):
                            m.observe = False
            print(f"step {self.step} loss {self.loss.item():.4f}")
