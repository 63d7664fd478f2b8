import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR

STEP = 0


def make_model():
    return nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).cuda()


def warmup_cosine(warmup: int, total: int):
    import math

    def fn(step):
        if step < warmup:
            return step / max(1, warmup)
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))
    return fn


model = make_model()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
sched = LambdaLR(opt, warmup_cosine(100, 10_000))

model_t = make_model()
opt_t = torch.optim.AdamW(model_t.parameters(), lr=torch.tensor(3e-4), weight_decay=0.1)
sched_t = LambdaLR(opt_t, warmup_cosine(100, 10_000))


@torch.compile(mode="reduce-overhead")
def fwd_loss(x, y):
    return F.mse_loss(model(x), y)


@torch.compile(mode="reduce-overhead")
def opt_step():
    global STEP
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)  # HAZARD: host-sync
    opt.step()
    STEP += 1  # HAZARD: host-code


@torch.compile(mode="reduce-overhead")
def opt_step_tensor_lr():
    opt_t.step()


def train(loader):
    for x, y in loader:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        loss = fwd_loss(x, y)
        loss.backward()
        opt_step()
        opt.zero_grad(set_to_none=True)
        sched.step()  # HAZARD: python-scalar

        loss_t = F.mse_loss(model_t(x), y)
        loss_t.backward()
        opt_step_tensor_lr()
        opt_t.zero_grad(set_to_none=True)
        sched_t.step()  # CLEAN: lr is a tensor, so the scheduler updates it in place without recompiling
