import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

WARMUP_ITERS = 3
BATCH, DIM, CLASSES = 32, 1024, 10


def setup() -> int:
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0")
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])  # CLEAN: int() of an environment string, not a tensor
    torch.cuda.set_device(local_rank)
    return local_rank


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, CLASSES)).cuda()


def main(loader) -> None:
    rank = setup()
    model = make_model()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        ddp = DDP(model, device_ids=[rank])
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3, capturable=True)
    x = torch.zeros(BATCH, DIM, device="cuda")
    y = torch.zeros(BATCH, dtype=torch.long, device="cuda")

    def step():
        opt.zero_grad(set_to_none=False)
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: autocast cache disabled inside the captured step
            loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ddp.parameters(), 1.0, error_if_nonfinite=True)  # HAZARD: host-sync
        opt.step()  # CLEAN: optimizer constructed with capturable=True
        return loss.detach()

    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARMUP_ITERS):
            step()
    torch.cuda.current_stream().wait_stream(side)

    train_graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(train_graph):  # HAZARD: api-misuse
        static_loss = step()

    eval_graph = torch.cuda.CUDAGraph()
    with torch.no_grad():
        for _ in range(3):
            model(x)
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            with torch.cuda.graph(eval_graph):
                eval_logits = model(x)

    for it, (xb, yb) in enumerate(loader):
        x.copy_(xb, non_blocking=True)
        y.copy_(yb, non_blocking=True)
        train_graph.replay()
        if rank == 0 and it % 100 == 0:  # CLEAN: int comparisons on rank/iteration
            eval_graph.replay()
            acc = (eval_logits.argmax(-1) == y).float().mean()
            print(f"it {it} loss {static_loss.item():.4f} acc {acc.item():.3f}")  # CLEAN: .item() after replay, outside any capture
    dist.destroy_process_group()


if __name__ == "__main__":
    from torch.utils.data import DataLoader, TensorDataset

    ds = TensorDataset(torch.randn(4096, DIM), torch.randint(0, CLASSES, (4096,)))
    main(DataLoader(ds, batch_size=BATCH, drop_last=True, pin_memory=True))
