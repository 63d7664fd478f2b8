"""train.py graphed by hand: the whole step (forward, loss, backward, clipping, AdamW) in one CUDA graph.

What changed, and why:
- AdamW gets capturable=True and its learning rate lives in a device tensor; the cosine schedule
  writes that tensor in place (LRScheduler.step fills tensor learning rates), so the captured step
  reads each new value.
- The batch is copied into static input tensors; the graph reads them at the captured addresses.
- The first 3 real steps run eagerly on a side stream: they train (as in train.py) and are the warm-up.
- The loss is read after the replay, outside the graph.
"""

import time

import torch
from torch import nn
from train import STEPS, batches, make_model  # the same model and data as train.py

WARMUP = 3


def main():
    torch.manual_seed(0)
    model = make_model()
    data = batches()
    optimizer = torch.optim.AdamW(model.parameters(), lr=torch.tensor(1e-3, device="cuda"), capturable=True)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=STEPS)
    loss_fn = nn.CrossEntropyLoss()
    static_x, static_y = (t.clone() for t in data[0])

    def step():
        loss = loss_fn(model(static_x), static_y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss

    torch.cuda.synchronize()
    start = time.perf_counter()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph, static_loss = None, None
    for number in range(STEPS):
        x, y = data[number % len(data)]
        static_x.copy_(x)
        static_y.copy_(y)
        if number < WARMUP:  # the first real steps are the warm-up
            with torch.cuda.stream(side):
                optimizer.zero_grad(set_to_none=True)
                loss = step()
            torch.cuda.current_stream().wait_stream(side)
        else:
            if graph is None:
                optimizer.zero_grad(set_to_none=True)  # gradients are then made inside the graph
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    static_loss = step()
            graph.replay()
            loss = static_loss
        scheduler.step()
        if number % 20 == 0:
            print(f"step {number} loss {loss.item():.5f}")
    torch.cuda.synchronize()
    print(f"time per step {(time.perf_counter() - start) / STEPS * 1e3:.3f} ms")
    print(f"running mean {model[1].running_mean.sum().item():.5f}")


if __name__ == "__main__":
    main()
