import random

import numpy as np
import torch


def _jitter(images, strength):
    noise = torch.as_tensor(np.random.randn(*images.shape[1:]), dtype=images.dtype, device=images.device)  # HAZARD: host-code
    return images + strength * noise


def augment(images: torch.Tensor, labels: torch.Tensor, p_flip: float = 0.5, alpha: float = 0.4):
    if random.random() < p_flip:  # HAZARD: host-code
        images = images.flip(-1)
    images = _jitter(images, 0.05)
    lam = torch.distributions.Beta(alpha, alpha).sample()  # HAZARD: host-code
    perm = torch.randperm(images.shape[0], device=images.device)  # CLEAN: device-side permutation of a static size
    mixed = lam * images + (1 - lam) * images[perm]
    batch_mean = mixed.mean().cpu()  # HAZARD: host-sync
    return mixed, labels, labels[perm], lam, batch_mean


augment_graphed = torch.compile(augment, options={"triton.cudagraphs": True})


@torch.compile  # default inductor mode: no CUDA graphs
def grad_norm(params):
    total = torch.stack([p.grad.detach().norm() for p in params if p.grad is not None]).norm()
    return total.item()  # CLEAN: default-mode torch.compile without CUDA graphs


def train_epoch(model, loader, opt, loss_fn):
    params = [p for p in model.parameters() if p.requires_grad]
    for step, (x, y) in enumerate(loader):
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        x, y_a, y_b, lam, mean = augment_graphed(x, y)
        out = model(x)
        loss = lam * loss_fn(out, y_a) + (1 - lam) * loss_fn(out, y_b)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = grad_norm(params)
        opt.step()
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.3f} |g| {gn:.2f} mean {float(mean):.3f}")  # CLEAN: host reads in the eager loop, outside the compiled function
