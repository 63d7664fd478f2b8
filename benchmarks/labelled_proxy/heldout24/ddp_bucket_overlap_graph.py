"""Hand-rolled data-parallel gradient bucketing with comm/compute overlap, whole step graphed.

Gradients are flattened into fixed buckets as they become ready; each full bucket is
all-reduced on a dedicated NCCL stream while backward keeps running.  The whole
fwd/bwd/all-reduce/step iteration is captured after eleven eager warm-up steps.
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class GradBuckets:
    def __init__(self, params, bucket_mb=25):
        self.params = [p for p in params if p.requires_grad]
        self.comm = torch.cuda.Stream()
        self.log_stream = torch.cuda.Stream()
        cap = bucket_mb * 2**20 // 4
        self.buckets, cur, size = [], [], 0
        for p in reversed(self.params):
            cur.append(p)
            size += p.numel()
            if size >= cap:
                self.buckets.append(cur)
                cur, size = [], 0
        if cur:
            self.buckets.append(cur)
        self.flat = [torch.zeros(sum(p.numel() for p in b), device="cuda") for b in self.buckets]
        self.owner = {p: i for i, b in enumerate(self.buckets) for p in b}
        self.pending = [0] * len(self.buckets)
        self.bucket_norms = torch.zeros(len(self.buckets), device="cuda")
        for p in self.params:
            p.register_post_accumulate_grad_hook(self._on_grad)

    def _on_grad(self, p):
        i = self.owner[p]
        self.pending[i] += 1
        if self.pending[i] == len(self.buckets[i]):
            self.pending[i] = 0
            torch.cat([q.grad.flatten() for q in self.buckets[i]], out=self.flat[i])
            ready = torch.cuda.Event()
            ready.record()
            self.comm.wait_event(ready)
            with torch.cuda.stream(self.comm):  # CLEAN: forked through the event, joined in finish()
                dist.all_reduce(self.flat[i])
                self.flat[i].div_(dist.get_world_size())
            with torch.cuda.stream(self.log_stream):  # HAZARD: stream
                self.bucket_norms[i] = self.flat[i].norm()

    def finish(self):
        torch.cuda.current_stream().wait_stream(self.comm)
        for b, flat in zip(self.buckets, self.flat):
            off = 0
            for p in b:
                p.grad.copy_(flat[off:off + p.numel()].view_as(p))
                off += p.numel()


class Trainer:
    def __init__(self, model: nn.Module, batch_shape, n_classes):
        self.model = model.cuda()
        self.buckets = GradBuckets(self.model.parameters())
        self.opt = torch.optim.Adam(self.model.parameters(), lr=3e-4)
        self.x = torch.zeros(batch_shape, device="cuda")
        self.y = torch.zeros(batch_shape[0], dtype=torch.long, device="cuda")
        self.loss_scale = 2.0 ** 14
        self.graph = torch.cuda.CUDAGraph()

    def _iteration(self):
        logits = self.model(self.x)
        loss = F.cross_entropy(logits, self.y)
        scale = self.loss_scale  # HAZARD: python-scalar
        (loss * scale).backward()
        self.buckets.finish()
        found_inf = torch.stack([torch.isinf(f).any() for f in self.buckets.flat]).any()
        self.skip = bool(found_inf)  # HAZARD: host-sync
        for p in self.model.parameters():
            p.grad.div_(scale)
        self.opt.step()  # HAZARD: optimizer
        self.opt.zero_grad(set_to_none=False)
        return loss.detach()

    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(11):
                self._iteration()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph):  # CLEAN: own side stream, after 11 DDP-style warm-ups
            self.static_loss = self._iteration()

    def step(self, x, y):
        self.x.copy_(x, non_blocking=True)
        self.y.copy_(y, non_blocking=True)
        self.graph.replay()
        return self.static_loss

    def update_scale(self, overflowed: bool):
        self.loss_scale = self.loss_scale / 2 if overflowed else min(self.loss_scale * 2, 2.0 ** 16)
