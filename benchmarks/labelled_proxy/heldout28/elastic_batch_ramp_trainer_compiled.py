"""Elastic (torchrun --nnodes=2:8) pre-training of a 350M LM with a global-batch ramp-up:
the micro-batch is fixed and gradient accumulation grows as the global batch ramps.
The loss and the AdamW step are compiled with mode="reduce-overhead"; gradients are
averaged with one flat all-reduce between them."""
import math
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F


class ElasticTrainer:
    def __init__(self, model, micro_batch=8, seq=2048, base_lr=3e-4):
        self.model, self.micro, self.seq, self.base_lr = model, micro_batch, seq, base_lr
        self.world = int(os.environ["WORLD_SIZE"])  # CLEAN: read once per rendezvous on the host
        self.accum = 1
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.opt = torch.optim.AdamW(self.params, lr=base_lr, betas=(0.9, 0.95), weight_decay=0.1)
        self.loss_fn = torch.compile(self._loss, mode="reduce-overhead")
        self.opt_step = torch.compile(self.opt.step, mode="reduce-overhead")
        self.flat = torch.zeros(sum(p.numel() for p in self.params), device="cuda")

    def _loss(self, ids, labels):
        logits = self.model(ids)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())
        if not torch.isfinite(loss):  # HAZARD: dynamic-control-flow
            loss = torch.zeros_like(loss)
        return loss / self.accum  # HAZARD: python-scalar

    def _allreduce_grads(self):
        off = 0
        for p in self.params:
            self.flat[off:off + p.numel()].copy_(p.grad.view(-1))
            off += p.numel()
        dist.all_reduce(self.flat)
        self.flat.div_(self.world)
        off = 0
        for p in self.params:
            p.grad.copy_(self.flat[off:off + p.numel()].view_as(p))
            off += p.numel()

    def lr_at(self, step, warmup=2000, total=300_000):
        if step < warmup:
            return self.base_lr * step / warmup
        return self.base_lr * 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))

    def ramp(self, step, target_global=1024):
        global_batch = min(target_global, 64 + step // 100 * 64)
        return max(1, global_batch // (self.micro * self.world))

    def train(self, loader, steps):
        it = iter(loader)
        for step in range(steps):
            self.accum = self.ramp(step)
            total = torch.zeros((), device="cuda")
            for _ in range(self.accum):
                ids, labels = next(it)
                loss = self.loss_fn(ids.cuda(non_blocking=True), labels.cuda(non_blocking=True))  # HAZARD: dynamic-shape
                loss.backward()
                total += loss.detach().clone()  # CLEAN: cloned before the compiled optimizer step runs
            self._allreduce_grads()
            for g in self.opt.param_groups:
                g["lr"] = self.lr_at(step)  # HAZARD: optimizer
            self.opt_step()
            self.opt.zero_grad(set_to_none=False)
            if step % 100 == 0 and dist.get_rank() == 0:
                print(f"step {step} accum {self.accum} loss {total.item():.3f}")  # CLEAN: eager host read outside the compiled functions


def make_loader(dataset, micro_batch):
    sampler = torch.utils.data.distributed.DistributedSampler(dataset, shuffle=True, drop_last=False)
    return torch.utils.data.DataLoader(dataset, batch_size=micro_batch, sampler=sampler,
                                       drop_last=False, pin_memory=True, num_workers=4)


if __name__ == "__main__":
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
