"""SigLIP-style image-text pretraining with a captured step that fires callbacks.

The trainer captures forward, sigmoid loss, backward and AdamW into one CUDA graph;
callbacks hook `after_backward` and `before_step`, so they run inside the capture.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SigLIP(nn.Module):
    def __init__(self, image_tower, text_tower, d=768):
        super().__init__()
        self.image_tower, self.text_tower = image_tower, text_tower
        self.t_prime = nn.Parameter(torch.tensor(2.3026))
        self.bias = nn.Parameter(torch.tensor(-10.0))

    def forward(self, images, tokens):
        zi = F.normalize(self.image_tower(images), dim=-1)
        zt = F.normalize(self.text_tower(tokens), dim=-1)
        logits = zi @ zt.t() * self.t_prime.exp() + self.bias
        labels = 2 * torch.eye(logits.shape[0], device=logits.device) - 1
        return -F.logsigmoid(labels * logits).sum() / logits.shape[0]


class Callback:
    def after_backward(self, trainer): ...
    def before_step(self, trainer): ...


class ClipGrads(Callback):
    def before_step(self, trainer):
        torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), 1.0)  # CLEAN: no host sync


class LogitScaleMonitor(Callback):
    def __init__(self):
        self.seen = 0

    def after_backward(self, trainer):
        self.seen += 1  # HAZARD: host-code
        print(f"temperature={trainer.model.t_prime.exp():.3f}")  # HAZARD: host-sync


class GradNoise(Callback):
    def __init__(self, sigma=1e-3):
        self.sigma = sigma
        self.gen = torch.Generator(device="cuda")

    def after_backward(self, trainer):
        for p in trainer.model.parameters():
            if p.grad is not None:
                p.grad.add_(torch.randn(p.grad.shape, device=p.device, generator=self.gen), alpha=self.sigma)  # HAZARD: rng


class DeviceStepCounter(Callback):
    def __init__(self):
        self.steps = torch.zeros((), dtype=torch.long, device="cuda")

    def before_step(self, trainer):
        self.steps.add_(1)  # CLEAN: counter kept on the device


class GraphedTrainer:
    def __init__(self, model, callbacks, batch=256, img=224, ctx=64):
        self.model = model.cuda()
        self.callbacks = callbacks
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4, capturable=True)  # CLEAN: capturable
        self.images = torch.zeros(batch, 3, img, img, device="cuda")
        self.tokens = torch.zeros(batch, ctx, dtype=torch.long, device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    def _step(self):
        loss = self.model(self.images, self.tokens)
        loss.backward()
        for cb in self.callbacks:
            cb.after_backward(self)
        for cb in self.callbacks:
            cb.before_step(self)
        self.opt.step()
        self.opt.zero_grad(set_to_none=False)
        return loss.detach()

    def setup(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self.loss = self._step()

    def fit(self, loader):
        for images, tokens in loader:
            self.images.copy_(images, non_blocking=True)
            self.tokens.copy_(tokens, non_blocking=True)
            self.graph.replay()
        return self.loss.item()  # CLEAN: read after replay

    def load_temperature(self, value):
        self.model.t_prime = nn.Parameter(torch.tensor(value, device="cuda"))  # HAZARD: static-address


def build(image_tower, text_tower):
    trainer = GraphedTrainer(SigLIP(image_tower, text_tower), [ClipGrads(), LogitScaleMonitor(), GradNoise(), DeviceStepCounter()])
    trainer.setup()
    return trainer
