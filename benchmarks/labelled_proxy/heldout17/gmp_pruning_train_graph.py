"""Gradual magnitude pruning (Zhu & Gupta cubic schedule) of a ResNet during training.

The forward/backward/SGD step plus the re-application of the weight masks is one captured
graph. Every `prune_every` steps the masks are recomputed eagerly from weight magnitudes.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class CubicSparsity:
    def __init__(self, final=0.9, begin_step=2000, end_step=40000, initial=0.0):
        self.final, self.initial = final, initial
        self.begin, self.end = begin_step, end_step

    def __call__(self, step):
        if step < self.begin:
            return self.initial
        frac = min(1.0, (step - self.begin) / (self.end - self.begin))
        return self.final + (self.initial - self.final) * (1.0 - frac) ** 3


class GMPTrainer:
    def __init__(self, model, batch=256, img=32, epochs=90, steps_per_epoch=195, prune_every=1000,
                 inplace_masks=True):
        self.model = model.cuda()
        self.prunable = [m for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
        for m in self.prunable:
            m.register_buffer("weight_mask", torch.ones_like(m.weight))
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-5)
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=epochs * steps_per_epoch)
        self.schedule = CubicSparsity(end_step=epochs * steps_per_epoch // 2)
        self.prune_every, self.inplace_masks = prune_every, inplace_masks
        self.sparse_reg = 0.0
        self.step_idx = 0
        self.x = torch.zeros(batch, 3, img, img, device="cuda")
        self.y = torch.zeros(batch, dtype=torch.long, device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    def _apply_masks(self):
        with torch.no_grad():
            for m in self.prunable:
                m.weight.mul_(m.weight_mask)  # CLEAN: in-place masking keeps the parameter address

    def _step(self):
        logits = self.model(self.x)
        loss = F.cross_entropy(logits, self.y, label_smoothing=0.1)
        l1 = sum(m.weight.abs().sum() for m in self.prunable)
        loss = loss + self.sparse_reg * l1  # HAZARD: python-scalar
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.opt.step()
        self._apply_masks()
        self.step_idx += 1  # HAZARD: host-code
        return loss.detach()

    def capture(self, warmup=5):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(warmup):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self.loss = self._step()

    @torch.no_grad()
    def update_masks(self):
        sparsity = self.schedule(self.step_idx)
        for m in self.prunable:
            w = m.weight.detach().abs().flatten()
            k = int(sparsity * w.numel())
            if k == 0:
                continue
            thresh = w.kthvalue(k).values.item()  # CLEAN: eager mask update between replays
            new_mask = (m.weight.abs() > thresh).to(m.weight.dtype)
            if self.inplace_masks:
                m.weight_mask.copy_(new_mask)  # CLEAN: copy into the captured mask buffer
            else:
                m.weight_mask = new_mask  # HAZARD: static-address

    def fit(self, loader, epochs):
        self.capture()
        for epoch in range(epochs):
            for i, (x, y) in enumerate(loader):
                self.x.copy_(x, non_blocking=True)
                self.y.copy_(y, non_blocking=True)
                self.graph.replay()
                self.sched.step()  # HAZARD: optimizer
                if i % self.prune_every == 0:
                    self.update_masks()
                    self.sparse_reg = 1e-5 * self.schedule(self.step_idx)
            print(f"epoch {epoch} loss {self.loss.item():.4f}")  # CLEAN: host read after the replays
