"""DiLoCo-style low-communication training across data centres: each replica runs H inner
AdamW steps on its own (one captured inner step), then a captured outer step all-reduces
the parameter deltas and applies Nesterov momentum to the shared global copy."""
import math
import random

import torch
import torch.distributed as dist


class DiLoCo:
    def __init__(self, model, inner_lr=4e-4, outer_lr=0.7, H=500, p_drop_fragment=0.0):
        self.model, self.H = model, H
        self.params = [p for p in model.parameters()]
        self.inner = torch.optim.AdamW(self.params, lr=inner_lr, capturable=True, weight_decay=0.1)  # CLEAN: capturable AdamW stepped in the graph
        self.global_params = [p.detach().clone() for p in self.params]
        self.momentum = [torch.zeros_like(p) for p in self.params]
        self.outer_lr, self.mu = outer_lr, 0.9
        self.p_drop_fragment = p_drop_fragment
        self.x = torch.zeros(8, 2048, dtype=torch.long, device="cuda")
        self.y = torch.zeros(8, 2048, dtype=torch.long, device="cuda")
        self.inner_graph, self.outer_graph = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        self.world = dist.get_world_size()

    def _inner(self):
        loss = self.model(self.x, labels=self.y)
        loss.backward()
        self.inner.step()
        self.inner.zero_grad(set_to_none=False)
        return loss.detach()

    @torch.no_grad()
    def _outer(self):
        lr = self.outer_lr  # HAZARD: python-scalar
        for p, gp, m in zip(self.params, self.global_params, self.momentum):
            if random.random() < self.p_drop_fragment:  # HAZARD: host-code
                continue
            delta = gp - p
            dist.all_reduce(delta)  # CLEAN: NCCL all-reduce is capturable and issued identically on every rank
            delta.div_(self.world)
            ok = bool(torch.isfinite(delta).all())  # HAZARD: host-sync
            if not ok:
                delta.zero_()
            m.mul_(self.mu).add_(delta)  # CLEAN: in-place momentum update of a static buffer
            gp.sub_(lr * (delta + self.mu * m))
            p.copy_(gp)  # CLEAN: replicas restart from the global copy in place

    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._inner()
            self._outer()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.inner_graph):
            self.static_loss = self._inner()
        dist.barrier()
        with torch.cuda.graph(self.outer_graph):
            self._outer()

    def cosine(self, step, total, warmup=1000):
        if step < warmup:
            return step / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))

    def train(self, loader, total_steps, base_lr=4e-4):
        for step, (x, y) in enumerate(loader):
            for g in self.inner.param_groups:
                g["lr"] = base_lr * self.cosine(step, total_steps)  # HAZARD: optimizer
            self.x.copy_(x)
            self.y.copy_(y)
            self.inner_graph.replay()
            if (step + 1) % self.H == 0:
                self.outer_lr = 0.7 * self.cosine(step, total_steps)
                self.outer_graph.replay()
            if step == total_steps:
                break
