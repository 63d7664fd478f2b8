"""Whole-iteration CUDA graph for a ZeRO-1 style data-parallel trainer.

Each rank keeps the fp32 master copy and AdamW state for one shard of the flattened
dense parameters. The captured step runs forward, backward, a reduce-scatter of the
flat gradient, the shard update, and an all-gather back into the model. The token
embedding is not sharded and has its own optimizer.
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Zero1GraphedStep:
    def __init__(self, model: nn.Module, batch_shape, lr=3e-4, base_seed=17, clip=1.0):
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.model, self.clip, self.base_seed = model, clip, base_seed
        self.params = [p for n, p in model.named_parameters() if not n.startswith("embed.")]
        self.numel = sum(p.numel() for p in self.params)
        self.shard = (self.numel + self.world - 1) // self.world
        flat = torch.cat([p.detach().reshape(-1) for p in self.params])
        flat = F.pad(flat, (0, self.shard * self.world - self.numel))
        self.flat = flat.cuda()
        self.master = nn.Parameter(self.flat[self.rank * self.shard:(self.rank + 1) * self.shard].clone())
        self.master.grad = torch.zeros_like(self.master)
        self.opt = torch.optim.AdamW([self.master], lr=lr, weight_decay=0.1, capturable=True)  # CLEAN: capturable AdamW
        self.emb_opt = torch.optim.Adam(model.embed.parameters(), lr=lr)
        self.static_x = torch.zeros(*batch_shape, dtype=torch.long, device="cuda")
        self.static_y = torch.zeros(*batch_shape, dtype=torch.long, device="cuda")
        self.static_loss = None
        self.iteration = 0
        self.last_norm = 0.0
        self.graph = torch.cuda.CUDAGraph()

    def _unflatten_into_model(self):
        offset = 0
        for p in self.params:
            n = p.numel()
            p.data.copy_(self.flat[offset:offset + n].view_as(p))  # CLEAN: in-place copy keeps parameter addresses
            offset += n

    def _step(self):
        torch.cuda.manual_seed(self.base_seed + self.iteration)  # HAZARD: rng
        self.model.zero_grad(set_to_none=True)  # CLEAN: grads re-created from the graph pool, as in the PyTorch whole-network example
        logits = self.model(self.static_x)
        loss = F.cross_entropy(logits.flatten(0, 1), self.static_y.flatten())
        loss.backward()
        flat_grad = torch.cat([p.grad.reshape(-1) for p in self.params])
        flat_grad = F.pad(flat_grad, (0, self.shard * self.world - self.numel))
        dist.reduce_scatter_tensor(self.master.grad, flat_grad, op=dist.ReduceOp.AVG)
        norm = torch.nn.utils.clip_grad_norm_([self.master], self.clip)  # CLEAN: clip_grad_norm_ has no host sync
        self.last_norm = norm.item()  # HAZARD: host-sync
        self.opt.step()
        self.emb_opt.step()  # HAZARD: optimizer
        dist.all_gather_into_tensor(self.flat, self.master.detach())
        self._unflatten_into_model()
        self.iteration += 1  # HAZARD: host-code
        return loss.detach()

    def capture(self, sample_x, sample_y, warmup=3):
        self.static_x.copy_(sample_x)
        self.static_y.copy_(sample_y)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        dist.barrier()
        with torch.cuda.graph(self.graph):
            self.static_loss = self._step()

    def train_step(self, x, y):
        self.static_x.copy_(x, non_blocking=True)  # CLEAN: copy_ into the static batch
        self.static_y.copy_(y, non_blocking=True)
        self.graph.replay()
        return self.static_loss.clone()

    def set_lr(self, lr):
        for group in self.opt.param_groups:
            group["lr"] = lr  # HAZARD: optimizer


def train(model, loader, sched_fn, steps):
    x0, y0 = next(iter(loader))
    runner = Zero1GraphedStep(model, tuple(x0.shape))
    runner.capture(x0.cuda(), y0.cuda())
    for step, (x, y) in zip(range(steps), loader):
        runner.set_lr(sched_fn(step))
        loss = runner.train_step(x.cuda(non_blocking=True), y.cuda(non_blocking=True))
        if step % 100 == 0 and dist.get_rank() == 0:
            print(f"step {step} loss {loss.item():.4f}")
