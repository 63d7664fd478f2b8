"""Whole-iteration capture (forward, backward, all-reduce, optimizer) for a DDP classifier.

Launch with torchrun --nproc-per-node=8.
"""
import logging
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

log = logging.getLogger(__name__)
BS, DIM, N_CLS = 256, 1024, 1000


def make_model():
    return nn.Sequential(nn.Linear(DIM, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, N_CLS))


def main(loader, steps=10_000):
    os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0"
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(rank % torch.cuda.device_count())

    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        model = DDP(make_model().cuda(), device_ids=[torch.cuda.current_device()])  # CLEAN: DDP constructed on a side stream
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, capturable=True)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    crit = nn.CrossEntropyLoss()
    static_x = torch.randn(BS, DIM, device="cuda")
    static_y = torch.randint(0, N_CLS, (BS,), device="cuda")
    loss_hist = []

    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            crit(model(static_x), static_y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)

    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        with torch.cuda.graph(graph, stream=side):  # HAZARD: api-misuse
            out = model(static_x)
            loss = crit(out.float(), static_y)
            loss.backward()
            gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # CLEAN: norm and clipping stay on the device
            if gnorm > 50.0:  # HAZARD: dynamic-control-flow
                log.warning("large gradient norm during capture")
            opt.step()  # CLEAN: capturable AdamW
            loss_hist.append(loss.item())  # HAZARD: host-sync

    for step, (x, y) in zip(range(steps), loader):
        static_x.copy_(x, non_blocking=True)
        static_y.copy_(y, non_blocking=True)
        graph.replay()
        sched.step()  # HAZARD: optimizer
        if rank == 0 and step % 100 == 0:
            print(step, loss.item(), gnorm.item())
    dist.destroy_process_group()
