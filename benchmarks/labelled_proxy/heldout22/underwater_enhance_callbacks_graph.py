"""Underwater image enhancement (UIEB-style paired training, Water-Net-like fusion net) with a Lightning-like
Trainer whose captured training step fires callbacks: grad-norm logger, EMA weights and a loss mirror."""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("uie")

class Callback:
    def on_after_backward(self, trainer):
        pass

    def on_train_step_end(self, trainer, loss):
        pass

class GradNormLogger(Callback):
    def on_after_backward(self, trainer):
        total = torch.norm(torch.stack([p.grad.norm() for p in trainer.model.parameters()]))
        trainer.logged["grad_norm"] = total.item()  # HAZARD: host-sync

class EMAWeights(Callback):
    def __init__(self, model):
        self.shadow = [p.detach().clone() for p in model.parameters()]

    def on_train_step_end(self, trainer, loss):
        decay = min(0.999, (1 + trainer.global_step) / (10 + trainer.global_step))  # HAZARD: python-scalar
        torch._foreach_lerp_(self.shadow, [p.detach() for p in trainer.model.parameters()], 1.0 - decay)

class LossMirror(Callback):
    def __init__(self):
        self.stream = torch.cuda.Stream()
        self.host = torch.zeros((), pin_memory=True)

    def on_train_step_end(self, trainer, loss):
        with torch.cuda.stream(self.stream):  # HAZARD: stream
            self.host.copy_(loss, non_blocking=True)

class FusionNet(nn.Module):
    def __init__(self, c=32):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(12, c, 7, padding=3), nn.ReLU(), nn.Conv2d(c, c, 5, padding=2), nn.ReLU(),
                                  nn.Conv2d(c, 9, 3, padding=1))

    def forward(self, raw):
        wb = raw / raw.mean((2, 3), keepdim=True).clamp_min(1e-3) * 0.5
        gamma = raw.clamp_min(1e-6) ** 0.7
        he = (raw - raw.amin((2, 3), keepdim=True)) / (raw.amax((2, 3), keepdim=True) - raw.amin((2, 3), keepdim=True) + 1e-6)
        w = self.body(torch.cat([raw, wb, gamma, he], 1)).view(raw.shape[0], 3, 3, *raw.shape[2:]).softmax(1)
        return (w * torch.stack([wb, gamma, he], 1)).sum(1).clamp(0, 1)

class GraphTrainer:
    def __init__(self, model, callbacks, lr=2e-4, seed=3):
        self.model = model.cuda().train()
        self.opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.5, 0.999))
        self.callbacks, self.global_step, self.logged = callbacks, 0, {}
        self.jitter_gen = torch.Generator(device="cuda")
        self.jitter_gen.manual_seed(seed)
        self.graph = torch.cuda.CUDAGraph()

    def _fire(self, hook, *args):
        for cb in self.callbacks:
            getattr(cb, hook)(self, *args)

    def _step(self):
        b = self.static_raw.shape[0]
        gain = 1.0 + 0.1 * torch.randn(b, 3, 1, 1, device="cuda", generator=self.jitter_gen)  # HAZARD: rng
        out = self.model((self.static_raw * gain).clamp(0, 1))
        loss = F.l1_loss(out, self.static_ref) + 0.2 * F.mse_loss(F.avg_pool2d(out, 4), F.avg_pool2d(self.static_ref, 4))
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self._fire("on_after_backward")
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 0.5)  # CLEAN: clip_grad_norm_ is capturable
        self.opt.step()  # HAZARD: optimizer
        self._fire("on_train_step_end", loss.detach())
        return loss.detach()

    def fit(self, loader, steps):
        batches = iter(loader)
        raw, ref = next(batches)
        self.static_raw, self.static_ref = raw.clone(), ref.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph):
            log.info("capturing the UIE training step")  # CLEAN: plain-string log inside the capture
            self.static_loss = self._step()
        for raw, ref in batches:
            self.static_raw.copy_(raw)  # CLEAN: copy_ into the captured batch
            self.static_ref.copy_(ref)
            self.graph.replay()
            self.global_step += 1
            if self.global_step >= steps:
                break

if __name__ == "__main__":
    net = FusionNet()
    trainer = GraphTrainer(net, [GradNormLogger(), EMAWeights(net), LossMirror()])
    data = ((torch.rand(8, 3, 256, 256, device="cuda"), torch.rand(8, 3, 256, 256, device="cuda")) for _ in range(2000))
    trainer.fit(data, steps=1500)
