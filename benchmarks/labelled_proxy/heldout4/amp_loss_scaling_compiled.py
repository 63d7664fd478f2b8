"""FP16 training with a hand-written dynamic loss scaler (ported from an apex-era codebase).

Loss scaling, gradient health checks and the optimizer step are compiled through
one shared `functools.partial` wrapper configured for CUDA graphs.
"""
import functools

import torch
import torch.nn.functional as F

cg_compile = functools.partial(torch.compile, mode="reduce-overhead", fullgraph=False)


class LossScaledTrainer:
    def __init__(self, model, lr=2e-4, wd=0.05, init_scale=2.0 ** 16, growth_interval=2000, total_steps=100_000):
        self.model = model.cuda().train()
        decay = [p for n, p in model.named_parameters() if p.ndim > 1]
        no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}],
                                     lr=torch.tensor(lr, device="cuda"), capturable=True)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lambda s: min(1.0, s / 1000) * max(0.0, 1 - s / total_steps))
        self.base_wd, self.total_steps = wd, total_steps
        self.scale, self.growth_interval, self.good_steps = init_scale, growth_interval, 0
        self._scaled = cg_compile(self._scaled_loss)
        self._health = cg_compile(self._grad_health)
        self._opt_step = cg_compile(self.opt.step)

    def _scaled_loss(self, loss):
        return loss.float() * self.scale  # HAZARD: python-scalar

    def _grad_health(self, grads):
        norms = torch.stack([torch.linalg.vector_norm(g.float()) for g in grads])
        n_bad = (~torch.isfinite(norms)).sum().item()  # HAZARD: host-sync
        total = torch.linalg.vector_norm(norms)
        if not torch.isfinite(total):  # HAZARD: dynamic-control-flow
            total = torch.zeros_like(total)
        return total, n_bad

    def _update_scale(self, overflow):
        if overflow:
            self.scale, self.good_steps = max(self.scale / 2.0, 1.0), 0
        else:
            self.good_steps += 1
            if self.good_steps % self.growth_interval == 0:
                self.scale *= 2.0

    def step(self, step, x, y):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(self.model(x), y)
        self._scaled(loss).backward()
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        found_inf = torch.zeros((), device="cuda")
        inv_scale = torch.full((), 1.0 / self.scale, device="cuda")
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)  # CLEAN: device-side overflow check, in eager code
        gnorm, n_bad = self._health(grads)
        if n_bad == 0:
            self._opt_step()
            self.sched.step()  # CLEAN: the LR is a tensor that the scheduler updates in place
        self._update_scale(n_bad > 0)
        self.opt.param_groups[0]["weight_decay"] = self.base_wd * (1.0 - 0.5 * step / self.total_steps)  # HAZARD: optimizer
        self.opt.zero_grad(set_to_none=True)
        return loss.detach(), gnorm

    def fit(self, loader, log_every=100):
        for step, (x, y) in enumerate(loader):
            loss, gnorm = self.step(step, x.cuda(non_blocking=True), y.cuda(non_blocking=True))
            if step % log_every == 0:
                print(f"step {step} loss {loss.item():.4f} scale {self.scale:.0f}")  # CLEAN: host read in the eager loop
