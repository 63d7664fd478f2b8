"""Small LM training loop: loss and optimizer step are compiled separately."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR, OneCycleLR

VOCAB = 50304
model = nn.Sequential(nn.Embedding(VOCAB, 768), nn.Linear(768, 768), nn.GELU(), nn.Linear(768, VOCAB)).cuda()
head_params = list(model[-1].parameters())
body_params = [p for p in model.parameters() if all(p is not q for q in head_params)]

opt = torch.optim.AdamW(body_params, lr=3e-4, weight_decay=0.1)
sched = OneCycleLR(opt, max_lr=3e-4, total_steps=20_000)
head_opt = torch.optim.Adam(head_params, lr=torch.tensor(1e-3, device="cuda"), capturable=True)
head_sched = LambdaLR(head_opt, lambda s: min(1.0, (s + 1) / 500))


@torch.compile(mode="reduce-overhead")
def compute_loss(x, y, smoothing):
    logits = model(x)
    valid = (y != -100).flatten()
    idx = valid.nonzero().squeeze(1)  # HAZARD: dynamic-shape
    flat = logits.flatten(0, 1).index_select(0, idx)
    tgt = y.flatten().index_select(0, idx)
    loss = F.cross_entropy(flat, tgt, label_smoothing=smoothing)  # HAZARD: python-scalar
    if loss.isnan():  # HAZARD: dynamic-control-flow
        loss = torch.zeros_like(loss)
    return loss


@torch.compile(options={"triton.cudagraphs": True})
def token_accuracy(logits, y):
    valid = y != -100
    correct = ((logits.argmax(-1) == y) & valid).sum()
    return correct.float() / valid.sum().clamp(min=1)  # CLEAN: ratio kept as a device tensor


@torch.compile
def eval_loss(x, y):
    logits = model(x)
    keep = y != -100
    return F.cross_entropy(logits[keep], y[keep])  # CLEAN: default torch.compile, no CUDA graphs


@torch.compile(mode="max-autotune")
def opt_step():
    opt.step()
    head_opt.step()


def train(loader, val_loader, total_steps=20_000):
    for step, (x, y) in enumerate(loader):
        x = x.cuda(non_blocking=True)
        y = y.cuda(non_blocking=True)
        smoothing = 0.1 * (1.0 - step / total_steps)
        loss = compute_loss(x, y, smoothing)
        loss.backward()
        opt_step()
        sched.step()  # HAZARD: optimizer
        head_sched.step()  # CLEAN: tensor learning rate is updated in place with fill_
        opt.zero_grad(set_to_none=True)
        head_opt.zero_grad(set_to_none=True)
        if step % 200 == 0:
            with torch.no_grad():
                vx, vy = next(iter(val_loader))
                vl = eval_loss(vx.cuda(), vy.cuda())
                acc = token_accuracy(model(vx.cuda()), vy.cuda())
            print(f"step {step} loss {loss.item():.3f} val {vl.item():.3f} acc {acc.item():.3f}")
