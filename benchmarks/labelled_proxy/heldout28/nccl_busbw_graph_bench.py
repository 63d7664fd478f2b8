"""Cluster acceptance test: nccl-tests style bus-bandwidth sweep run under torchrun.
Each case is a functools.partial; `graph_bench` captures `iters` calls of it into one CUDA
graph and times the replays with CUDA events."""
import functools
import os
import time

import torch
import torch.distributed as dist


def graph_bench(case, iters=20, replays=50):
    g = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        with torch.cuda.graph(g, stream=side):  # HAZARD: api-misuse
            for _ in range(iters):
                case()
    torch.cuda.current_stream().wait_stream(side)
    dist.barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        g.replay()
    end.record()
    torch.cuda.synchronize()  # CLEAN: host sync after the replays, no capture is active
    return start.elapsed_time(end) / (replays * iters) * 1e-3


def allreduce_case(buf):
    dist.all_reduce(buf)


def allgather_case(out, inp):
    dist.all_gather_into_tensor(out, inp)


def reduce_scatter_case(out, inp):
    dist.reduce_scatter_tensor(out, inp)


def ragged_allgather_case(out, inp, sizes):
    lens = torch.tensor(sizes, device="cuda")  # HAZARD: host-sync
    dist.all_gather_into_tensor(out, inp)
    out.view(len(sizes), -1)[:, 0].copy_(lens.float())


def timed_allreduce_case(buf, log):
    t0 = time.perf_counter()  # HAZARD: host-code
    dist.all_reduce(buf)
    log.append(t0)


def checked_allreduce_case(buf, ref):
    dist.all_reduce(buf)
    torch.cuda.current_stream().synchronize()  # HAZARD: host-sync
    ref.copy_(buf[:16])  # CLEAN: device-side snapshot of a static slice


def fresh_allreduce_case(numel):
    torch.cuda.empty_cache()  # HAZARD: memory
    buf = torch.ones(numel, dtype=torch.bfloat16, device="cuda")
    dist.all_reduce(buf)


def main():
    dist.init_process_group("nccl")
    world = int(os.environ["WORLD_SIZE"])  # CLEAN: launcher env var read on the host
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rows = []
    for numel in [1 << k for k in range(16, 30, 2)]:
        buf = torch.ones(numel, dtype=torch.bfloat16, device="cuda")
        out = torch.empty(numel * world, dtype=torch.bfloat16, device="cuda")
        shard = torch.empty(numel // world, dtype=torch.bfloat16, device="cuda")
        cases = {
            "all_reduce": functools.partial(allreduce_case, buf),
            "all_gather": functools.partial(allgather_case, out, buf),
            "reduce_scatter": functools.partial(reduce_scatter_case, shard, buf),
            "ragged_all_gather": functools.partial(ragged_allgather_case, out, buf, [numel] * world),
            "timed_all_reduce": functools.partial(timed_allreduce_case, buf, []),
            "checked_all_reduce": functools.partial(checked_allreduce_case, buf, torch.empty(16, dtype=torch.bfloat16, device="cuda")),
            "fresh_all_reduce": functools.partial(fresh_allreduce_case, numel),
        }
        for name, case in cases.items():
            sec = graph_bench(case)
            nbytes = numel * 2
            factor = 2 * (world - 1) / world if name.endswith("all_reduce") else (world - 1) / world
            rows.append((name, nbytes, nbytes / sec * factor / 1e9))
    if dist.get_rank() == 0:
        for name, nbytes, busbw in rows:
            print(f"{name:>20s} {nbytes:>12d} B  busbw {busbw:7.1f} GB/s")


if __name__ == "__main__":
    main()
