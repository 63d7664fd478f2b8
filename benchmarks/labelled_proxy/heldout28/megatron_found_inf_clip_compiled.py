"""Mixed-precision optimizer wrapper for a TP x DP model written after Megatron's
MixedPrecisionOptimizer: fp16 grads are checked for inf/nan, the flag and the grad norm are
all-reduced over the model-parallel group, grads are unscaled and clipped, and AdamW steps.
The check and the AdamW step are compiled with mode="reduce-overhead"."""
import math

import torch
import torch.distributed as dist


class DynamicLossScaler:
    def __init__(self, init=2.0 ** 16, growth_interval=1000):
        self.scale, self.growth_interval, self.good_steps = init, growth_interval, 0

    def update(self, found_inf):
        if found_inf:
            self.scale = max(self.scale / 2, 1.0)
            self.good_steps = 0
        else:
            self.good_steps += 1
            if self.good_steps % self.growth_interval == 0:
                self.scale *= 2


class MPOptimizer:
    def __init__(self, params, mp_group, lr=1.5e-4, clip=1.0):
        self.params = [p for p in params if p.requires_grad]
        self.mp_group, self.clip = mp_group, clip
        self.opt = torch.optim.AdamW(self.params, lr=lr, weight_decay=0.1, capturable=True)  # CLEAN: capturable AdamW, step count on the device
        self.scaler = DynamicLossScaler()
        self.check = torch.compile(self._check, mode="reduce-overhead")
        self.opt_step = torch.compile(self.opt.step, mode="reduce-overhead")

    def _check(self):
        grads = [p.grad for p in self.params]
        inv = 1.0 / self.scaler.scale  # HAZARD: python-scalar
        bad = torch.stack([(~torch.isfinite(g)).any() for g in grads]).any()
        if bad.item():  # HAZARD: host-sync
            print("inf/nan in local fp16 grads")  # HAZARD: host-code
        norm_sq = torch.stack([g.float().pow(2).sum() for g in grads]).sum() * (inv * inv)
        return torch.stack([bad.float(), norm_sq])

    def step(self):
        flags = self.check().clone()  # CLEAN: graph output cloned before the collectives and the next compiled call
        dist.all_reduce(flags[:1], op=dist.ReduceOp.MAX, group=self.mp_group)
        dist.all_reduce(flags[1:], group=self.mp_group)
        grads = [p.grad for p in self.params]
        if flags[0] > 0:
            self.scaler.update(True)
            for p in self.params:
                p.grad = None
            return False
        coef = (self.clip / (flags[1].sqrt() + 1e-6)).clamp(max=1.0) / self.scaler.scale
        torch._foreach_mul_(grads, coef)  # CLEAN: eager unscale + clip with a device-tensor coefficient
        self.opt_step()
        self.scaler.update(False)
        for p in self.params:
            p.grad = None
        return True


def cosine_lr(it, max_lr=1.5e-4, min_lr=1e-5, warmup=2000, decay=320_000):
    if it < warmup:
        return max_lr * it / warmup
    r = min(1.0, (it - warmup) / (decay - warmup))
    return min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi * r))


def train(model, mpo, loader, iters):
    skipped = 0
    for it, (ids, labels) in zip(range(iters), loader):
        loss = model(ids.cuda(non_blocking=True), labels.cuda(non_blocking=True))
        (loss * mpo.scaler.scale).backward()
        for g in mpo.opt.param_groups:
            g["lr"] = cosine_lr(it)  # HAZARD: optimizer
        skipped += not mpo.step()
        if it % 100 == 0 and dist.get_rank() == 0:
            print(f"it {it} loss {loss.item():.3f} scale {mpo.scaler.scale:g} skipped {skipped}")  # CLEAN: eager host read, outside compiled code
    return skipped
