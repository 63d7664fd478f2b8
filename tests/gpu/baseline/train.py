"""A user's own training loop, eager: a small CNN with BatchNorm, AdamW, a cosine learning-rate
schedule, gradient clipping, the loss printed every 20 steps. (The original of train_graphed.py.)"""

import time

import torch
from torch import nn

STEPS, BATCH = 200, 32


def make_model():
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10),
    ).cuda()


def batches():
    g = torch.Generator(device="cpu").manual_seed(1)
    data = [(torch.randn(BATCH, 3, 16, 16, generator=g), torch.randint(0, 10, (BATCH,), generator=g)) for _ in range(8)]
    return [(x.cuda(), y.cuda()) for x, y in data]


def main():
    torch.manual_seed(0)
    model = make_model()
    data = batches()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=STEPS)
    loss_fn = nn.CrossEntropyLoss()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for step in range(STEPS):
        x, y = data[step % len(data)]
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.5f}")
    torch.cuda.synchronize()
    print(f"time per step {(time.perf_counter() - start) / STEPS * 1e3:.3f} ms")
    print(f"running mean {model[1].running_mean.sum().item():.5f}")


if __name__ == "__main__":
    main()
