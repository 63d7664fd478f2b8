"""Multi-node Conformer ASR pre-training: gradients are reduced hierarchically (intra-node
reduce-scatter over NVLink, inter-node all-reduce over IB, intra-node all-gather) on a
high-priority comm stream, inside one captured training step."""
import os

import torch
import torch.distributed as dist


def make_groups():
    world, local = dist.get_world_size(), int(os.environ["LOCAL_WORLD_SIZE"])
    node = dist.get_rank() // local
    intra = inter = None
    for n in range(world // local):
        g = dist.new_group(list(range(n * local, (n + 1) * local)))
        if n == node:
            intra = g
    for l in range(local):
        g = dist.new_group(list(range(l, world, local)))
        if l == dist.get_rank() % local:
            inter = g
    return intra, inter, local


class HierReducer:
    def __init__(self, params, intra, inter, local, world):
        self.params = [p for p in params if p.requires_grad]
        n = sum(p.numel() for p in self.params)
        self.flat = torch.zeros((n + local - 1) // local * local, device="cuda")
        self.intra, self.inter, self.local, self.world = intra, inter, local, world
        self.accum = 1  # raised by the batch-size ramp
        self.comm = torch.cuda.Stream(priority=-1)
        self.norm_stream = torch.cuda.Stream()
        self.gnorm = torch.zeros((), device="cuda")
        self.peaks = []

    def reduce(self):
        off = 0
        for p in self.params:
            self.flat[off:off + p.numel()].copy_(p.grad.view(-1))
            off += p.numel()
        with torch.cuda.stream(self.comm):  # HAZARD: stream
            shard = self.flat.new_empty(self.flat.numel() // self.local)
            dist.reduce_scatter_tensor(shard, self.flat, group=self.intra)
            dist.all_reduce(shard, group=self.inter)
            shard.mul_(1.0 / (self.world * self.accum))  # HAZARD: python-scalar
            dist.all_gather_into_tensor(self.flat, shard, group=self.intra)
        torch.cuda.current_stream().wait_stream(self.comm)
        del shard
        torch.cuda.empty_cache()  # HAZARD: memory
        self.norm_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.norm_stream):  # CLEAN: forked with wait_stream and joined below
            self.gnorm.copy_(self.flat.norm())
        torch.cuda.current_stream().wait_stream(self.norm_stream)
        self.peaks.append(self.flat.abs().max().cpu())  # HAZARD: host-sync
        off = 0
        for p in self.params:
            p.grad.copy_(self.flat[off:off + p.numel()].view_as(p))  # CLEAN: in-place unflatten into static grads
            off += p.numel()


class ConformerStep:
    def __init__(self, model, reducer, feats=(32, 1600, 80)):
        self.model, self.reducer = model, reducer
        self.opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=True)  # CLEAN: capturable Adam in the graph
        self.x = torch.zeros(feats, device="cuda")
        self.y = torch.zeros(feats[0], 400, dtype=torch.long, device="cuda")
        self.g = torch.cuda.CUDAGraph()

    def _step(self):
        loss = self.model(self.x, self.y)
        loss.backward()
        self.reducer.reduce()
        self.opt.step()
        self.opt.zero_grad(set_to_none=False)
        return loss.detach()

    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(11):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        dist.barrier()
        with torch.cuda.graph(self.g):
            self.loss = self._step()

    def fit(self, loader, ramp):
        for i, (x, y) in enumerate(loader):
            self.reducer.accum = ramp(i)
            self.x.copy_(x, non_blocking=True)
            self.y.copy_(y, non_blocking=True)
            self.g.replay()
