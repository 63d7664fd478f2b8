"""Only the optimizer step (clip + AdamW) is captured; forward/backward stay eager, as with an
"optimizer CUDA graph" option in large-model trainers."""
import math

import torch
import torch.nn as nn


def lr_at(step, warmup=2000, total=100_000, peak=3e-4, floor=3e-5):
    if step < warmup:
        return peak * (step + 1) / warmup
    prog = (step - warmup) / max(1, total - warmup)
    return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * prog))


class GraphedOptimizerStep:
    def __init__(self, model: nn.Module, max_norm=1.0):
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.opt = torch.optim.AdamW(self.params, lr=3e-4, weight_decay=0.1, capturable=True, foreach=True)
        self.max_norm = max_norm
        self.stream = torch.cuda.Stream()
        self.graph = torch.cuda.CUDAGraph()
        self.grad_norm = None
        self.skipped = torch.zeros((), dtype=torch.long, device="cuda")

    def _step(self):
        norm = torch.nn.utils.clip_grad_norm_(self.params, self.max_norm, error_if_nonfinite=True)  # HAZARD: host-sync
        finite = torch.isfinite(norm)
        self.skipped.add_((~finite).long())  # CLEAN: skip counter kept on the device
        torch._foreach_mul_([p.grad for p in self.params], finite.float())
        self.opt.step()  # CLEAN: capturable AdamW
        return norm

    def capture(self):
        for p in self.params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(self.stream)
        with torch.cuda.graph(self.graph, stream=torch.cuda.default_stream()):  # HAZARD: stream
            self.grad_norm = self._step()

    def __call__(self):
        self.graph.replay()
        return self.grad_norm


def train(model, loader, steps=100_000, wd_end=0.05):
    graphed = GraphedOptimizerStep(model)
    for step, (x, y) in zip(range(steps), loader):
        loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        loss.backward()
        if step == 0:
            graphed.capture()
        for g in graphed.opt.param_groups:
            g["lr"] = lr_at(step)  # HAZARD: optimizer
            g["weight_decay"] = 0.1 - (0.1 - wd_end) * step / steps  # HAZARD: optimizer
        norm = graphed()
        graphed.opt.zero_grad(set_to_none=False)  # CLEAN: grads zeroed in place, the addresses the graph reads stay valid
        if step % 100 == 0:
            print(step, loss.item(), norm.item(), int(graphed.skipped))
