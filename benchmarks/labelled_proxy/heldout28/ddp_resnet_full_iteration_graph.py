"""Data-parallel ResNet-50 training with the whole iteration (fwd + bwd + SGD) in one CUDA graph.

Launch: torchrun --nnodes=2 --nproc-per-node=8 ddp_resnet_full_iteration_graph.py
Loosely follows the "Usage with DistributedDataParallel" recipe of the CUDA notes.
"""
import logging
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP

log = logging.getLogger("ddp_graph")


class SmoothedCE:
    """Label-smoothed cross entropy; the trainer anneals eps towards zero."""

    def __init__(self, eps):
        self.eps = eps

    def __call__(self, logits, target):
        eps = self.eps  # HAZARD: python-scalar
        n = logits.size(-1)
        logp = F.log_softmax(logits.float(), dim=-1)
        nll = -logp.gather(1, target[:, None]).squeeze(1)
        return ((1.0 - eps) * nll - (eps / n) * logp.sum(-1)).mean()


def setup():
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0")
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])  # CLEAN: launcher env var parsed once on the host, no region
    torch.cuda.set_device(local_rank)
    return dist.get_rank(), dist.get_world_size()


class GraphedTrainer:
    def __init__(self, rank, batch=128, warmup_iters=3):
        self.rank = rank
        net = torchvision.models.resnet50(num_classes=1000).cuda().to(memory_format=torch.channels_last)
        self.model = DDP(net, device_ids=[torch.cuda.current_device()], bucket_cap_mb=50)  # HAZARD: stream
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.2, momentum=0.9, weight_decay=5e-5)
        self.criterion = SmoothedCE(0.1)
        self.static_x = torch.randn(batch, 3, 224, 224, device="cuda").contiguous(memory_format=torch.channels_last)
        self.static_y = torch.randint(0, 1000, (batch,), device="cuda")
        self.warmup_iters = warmup_iters
        self.graph = torch.cuda.CUDAGraph()

    def _step(self):
        self.opt.zero_grad(set_to_none=False)
        out = self.model(self.static_x)
        loss = self.criterion(out, self.static_y)
        loss.backward()
        self.opt.step()  # CLEAN: plain SGD keeps no host-side step count; momentum buffers exist after warm-up
        if self.rank == 0:  # CLEAN: the rank never changes, the branch is the same on every replay
            log.debug(f"rank0 captured loss {loss}")  # HAZARD: host-sync
        return loss.detach()

    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(self.warmup_iters):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        dist.barrier()
        with torch.cuda.graph(self.graph):  # HAZARD: api-misuse
            self.static_loss = self._step()

    def train_epoch(self, loader, epoch):
        self.criterion.eps = 0.1 * max(0.0, 1.0 - epoch / 30)
        total = torch.zeros((), device="cuda")
        for x, y in loader:
            self.static_x.copy_(x, non_blocking=True)  # CLEAN: in-place copy into the captured input
            self.static_y.copy_(y, non_blocking=True)
            self.graph.replay()
            total += self.static_loss
        dist.all_reduce(total)
        return total.item() / len(loader)  # CLEAN: host read after the replays, outside the graph


def main():
    rank, world = setup()
    torch.backends.cudnn.benchmark = True
    tf = torchvision.transforms.ToTensor()
    ds = torchvision.datasets.FakeData(size=64_000, image_size=(3, 224, 224), transform=tf)
    sampler = torch.utils.data.distributed.DistributedSampler(ds, num_replicas=world, rank=rank, drop_last=True)
    loader = torch.utils.data.DataLoader(ds, batch_size=128, sampler=sampler, pin_memory=True,
                                         drop_last=True, num_workers=8)
    trainer = GraphedTrainer(rank)
    trainer.capture()
    for epoch in range(90):
        sampler.set_epoch(epoch)
        avg = trainer.train_epoch(loader, epoch)
        if rank == 0:
            print(f"epoch {epoch:3d}  loss {avg:.4f}")
    del trainer.graph
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
