"""Low-level capture of a CNN train step with an EMA copy updated on a side stream."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F


class EMA:
    def __init__(self, model, decay=0.999):
        self.shadow = copy.deepcopy(model).eval().requires_grad_(False)
        self.decay = decay

    @torch.no_grad()
    def update(self, model):
        for e, p in zip(self.shadow.parameters(), model.parameters()):
            e.lerp_(p.detach(), 1.0 - self.decay)  # HAZARD: python-scalar


def train(loader, steps=2000):
    model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(32 * 32 * 32, 10)).cuda()
    opt = torch.optim.Adamax(model.parameters(), lr=2e-3)
    ema = EMA(model)
    ema_stream = torch.cuda.Stream()
    sx = torch.zeros(64, 3, 32, 32, device="cuda")
    sy = torch.zeros(64, dtype=torch.long, device="cuda")
    running_acc = 0.0

    for _ in range(3):
        F.cross_entropy(model(sx), sy).backward()
        opt.step()
        ema.update(model)
    torch.cuda.synchronize()
    opt.zero_grad(set_to_none=False)

    g = torch.cuda.CUDAGraph()
    g.capture_begin()  # HAZARD: stream
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        out = model(sx)
        loss = F.cross_entropy(out.float(), sy)
    loss.backward()
    opt.step()  # HAZARD: optimizer
    ema_stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(ema_stream):  # HAZARD: stream
        ema.update(model)
    acc = (out.argmax(-1) == sy).float().mean()
    running_acc += acc.item()  # HAZARD: host-sync
    g.capture_end()

    for step, (x, y) in zip(range(steps), loader):
        sx.copy_(x, non_blocking=True)
        sy.copy_(y, non_blocking=True)
        ema.decay = min(0.999, (1 + step) / (10 + step))
        g.replay()
    return ema.shadow
