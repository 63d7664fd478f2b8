"""Multi-node launcher for a 3-D CNN video action-recognition job (torchrun, 4 x 8 GPUs).
The training step is captured through a small `graph_capture` context manager that lines
the ranks up with a barrier before and after the capture."""
import contextlib
import logging
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

log = logging.getLogger("launcher")


def read_env():
    env = {k: int(os.environ[k]) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")}  # CLEAN: torchrun env vars parsed once on the host
    env["MASTER"] = os.environ.get("MASTER_ADDR", "localhost")
    return env


@contextlib.contextmanager
def graph_capture(graph, pool=None):
    dist.barrier()  # CLEAN: cross-rank barrier before the capture begins, outside it
    stream = torch.cuda.current_stream()
    with torch.cuda.graph(graph, pool=pool, stream=stream):  # HAZARD: stream
        yield graph
    dist.barrier()


class VideoStep:
    def __init__(self, model, opt, env, clip=(8, 3, 16, 224, 224), seed=1234):
        self.model, self.opt, self.env = model, opt, env
        self.clips = torch.zeros(clip, device="cuda")
        self.labels = torch.zeros(clip[0], dtype=torch.long, device="cuda")
        self.base_seed, self.step_idx = seed, 0
        self.graph = torch.cuda.CUDAGraph()

    def _temporal_jitter(self, x):
        off = np.random.randint(0, 4)  # HAZARD: host-code
        return torch.roll(x, shifts=int(off), dims=2)

    def _step(self):
        torch.cuda.manual_seed(self.base_seed + 7919 * self.env["RANK"] + self.step_idx)  # HAZARD: rng
        x = self._temporal_jitter(self.clips)
        x = F.dropout(x, p=0.1)  # CLEAN: default CUDA generator, replay-safe
        loss = F.cross_entropy(self.model(x), self.labels, label_smoothing=0.1)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=False)
        if self.env["LOCAL_RANK"] == 0:
            log.info(f"[node {self.env['RANK'] // self.env['LOCAL_WORLD_SIZE']}] loss={loss}")  # HAZARD: host-sync
        return loss.detach()

    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for self.step_idx in range(11):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        self.step_idx += 1
        with graph_capture(self.graph):
            self.loss = self._step()

    def run(self, loader):
        for clips, labels in loader:
            self.clips.copy_(clips, non_blocking=True)  # CLEAN: in-place copy from the pinned loader batch
            self.labels.copy_(labels, non_blocking=True)
            self.graph.replay()
            self.step_idx += 1


def main(build_model):
    env = read_env()
    dist.init_process_group("nccl", rank=env["RANK"], world_size=env["WORLD_SIZE"])
    torch.cuda.set_device(env["LOCAL_RANK"])
    torch.manual_seed(1234 + env["RANK"])  # CLEAN: per-rank seed set once at start-up, before any capture
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        model = DDP(build_model().cuda(), device_ids=[env["LOCAL_RANK"]])  # CLEAN: DDP constructed inside a side-stream context, as the CUDA notes ask
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    step = VideoStep(model, opt, env)
    step.capture()
    return step
