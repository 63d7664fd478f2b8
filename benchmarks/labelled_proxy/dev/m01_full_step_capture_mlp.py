"""Whole-iteration CUDA graph (forward + backward + optimizer) for an MLP regressor."""
import argparse
import time

import torch
import torch.nn as nn


class MLP(nn.Module):
    def __init__(self, d_in, d_hidden, d_out, use_bias=True):
        super().__init__()
        self.use_bias = use_bias
        self.fc1 = nn.Linear(d_in, d_hidden, bias=use_bias)
        self.fc2 = nn.Linear(d_hidden, d_out, bias=use_bias)
        self.act = nn.GELU()

    def forward(self, x):
        h = self.act(self.fc1(x))
        if self.use_bias:  # CLEAN: flag fixed in __init__, same at capture and replay
            h = h * 0.5
        return self.fc2(h)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--lr", type=float, default=3e-4)
    args = p.parse_args()

    device = torch.device("cuda")
    model = MLP(512, 2048, 128).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.steps)
    loss_fn = nn.MSELoss()

    static_x = torch.randn(args.batch, 512, device=device)
    static_y = torch.randn(args.batch, 128, device=device)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            loss_fn(model(static_x), static_y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)

    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_out = model(static_x)
        static_loss = loss_fn(static_out, static_y)
        static_loss.backward()
        opt.step()  # HAZARD: optimizer
        print("captured loss", static_loss)  # HAZARD: host-sync

    t0 = time.perf_counter()  # CLEAN: host clock outside the captured region
    for step in range(args.steps):
        static_x.copy_(torch.randn(args.batch, 512, device=device))
        static_y.copy_(torch.randn(args.batch, 128, device=device))
        g.replay()
        sched.step()  # HAZARD: python-scalar
        if step % 50 == 0:
            print(f"step {step} loss {static_loss.item():.4f}")  # CLEAN: .item() after replay, outside the region
    torch.cuda.synchronize()
    print(f"{args.steps / (time.perf_counter() - t0):.1f} it/s")


if __name__ == "__main__":
    main()
