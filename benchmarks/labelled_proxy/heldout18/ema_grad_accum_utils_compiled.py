"""Distributed-training utilities: weight EMA, gradient accumulation buffers, and a
compiled optimizer step. All three hot paths are compiled with
options={"triton.cudagraphs": True} so that the per-parameter loops become single
graph replays.
"""
import torch
import torch.nn as nn

CG_OPTS = {"triton.cudagraphs": True}


class ExponentialMovingAverage(nn.Module):
    """Shadow weights kept as registered buffers, updated in place."""

    def __init__(self, model: nn.Module, decay=0.9999, reset_tol=5.0):
        super().__init__()
        self.names = []
        for i, p in enumerate(model.parameters()):
            self.register_buffer(f"shadow_{i}", p.detach().clone())
            self.names.append(f"shadow_{i}")
        self.decay, self.reset_tol = decay, reset_tol
        self.num_updates = 0
        self.needs_reset = False
        self.update = torch.compile(self._update, options=CG_OPTS)

    @torch.no_grad()
    def _update(self, params):
        d = min(self.decay, (1 + self.num_updates) / (10 + self.num_updates))  # HAZARD: python-scalar
        for name, p in zip(self.names, params):
            getattr(self, name).lerp_(p, 1.0 - d)  # CLEAN: shadow is a registered buffer (static input) updated in place
        drift = torch.stack([(p - getattr(self, n)).abs().max() for n, p in zip(self.names, params)]).max()
        if drift > self.reset_tol:  # HAZARD: dynamic-control-flow
            self.needs_reset = True

    @torch.no_grad()
    def step(self, model):
        self.update(list(model.parameters()))
        self.num_updates += 1
        if self.needs_reset:
            for name, p in zip(self.names, model.parameters()):
                getattr(self, name).copy_(p)
            self.needs_reset = False


@torch.compile(options=CG_OPTS)
def accumulate(acc_buffers, grads, scale):
    for b, g in zip(acc_buffers, grads):
        b.add_(g, alpha=scale)  # HAZARD: static-address


@torch.compile(options=CG_OPTS)
def averaged(acc_buffers, scale):
    return [b * scale for b in acc_buffers]  # CLEAN: out-of-place, the inputs are not mutated


def train(model, loader, accum_steps=4, epochs=3, lr=3e-4):
    model.cuda()
    ema = ExponentialMovingAverage(model).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=torch.tensor(lr, device="cuda"), weight_decay=0.05,
                            capturable=True)
    opt_step = torch.compile(opt.step, options=CG_OPTS)
    acc = [torch.zeros_like(p) for p in model.parameters()]
    for epoch in range(epochs):
        for i, (x, y) in enumerate(loader):
            loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
            loss.backward()
            accumulate(acc, [p.grad for p in model.parameters()], 1.0)
            model.zero_grad(set_to_none=False)
            if (i + 1) % accum_steps == 0:
                for p, g in zip(model.parameters(), averaged(acc, 1.0 / accum_steps)):
                    p.grad.copy_(g)
                for a in acc:
                    a.zero_()
                opt_step()
                ema.step(model)
        for group in opt.param_groups:
            group["lr"].fill_(lr * 0.5 ** (epoch + 1))  # CLEAN: tensor LR updated in place with fill_
            group["weight_decay"] = 0.05 * (1 + epoch)  # HAZARD: optimizer
    return ema
