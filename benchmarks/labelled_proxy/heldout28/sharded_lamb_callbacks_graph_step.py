"""BERT-large pre-training at batch 64k with a hand-written, parameter-sharded LAMB: each rank
updates the tensors it owns and broadcasts them. The training step is captured once and fires
user callbacks from inside the captured region."""
import torch
import torch.distributed as dist
import torch.nn.functional as F


class Callback:
    def on_after_backward(self, trainer): pass
    def on_step_end(self, trainer): pass


class GradNormLogger(Callback):
    def __init__(self): self.history = []

    def on_after_backward(self, trainer):
        self.history.append(trainer.global_norm.item())  # HAZARD: host-sync


class StepCounter(Callback):
    def __init__(self): self.n = 0

    def on_step_end(self, trainer):
        self.n += 1  # HAZARD: host-code


class LossMirror(Callback):
    def __init__(self):
        self.side = torch.cuda.Stream()
        self.buf = torch.zeros((), device="cuda")

    def on_step_end(self, trainer):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):  # HAZARD: stream
            self.buf.copy_(trainer.loss.detach())


class ShardedLamb:
    def __init__(self, params, lr=6e-3, betas=(0.9, 0.999), wd=0.01, eps=1e-6):
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.params = list(params)
        self.owned = [p for i, p in enumerate(self.params) if i % self.world == self.rank]
        self.state = {p: (torch.zeros_like(p), torch.zeros_like(p)) for p in self.owned}
        self.step_t = torch.zeros((), device="cuda")
        self.lr, self.betas, self.wd, self.eps = lr, betas, wd, eps

    @torch.no_grad()
    def step(self):
        self.step_t.add_(1)  # CLEAN: device-side step counter, advances on every replay
        b1, b2 = self.betas
        c1, c2 = 1 - b1 ** self.step_t, 1 - b2 ** self.step_t
        for p in self.owned:
            m, v = self.state[p]
            m.mul_(b1).add_(p.grad, alpha=1 - b1)
            v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
            upd = (m / c1) / ((v / c2).sqrt() + self.eps) + self.wd * p
            w_n, u_n = p.norm(), upd.norm()
            trust = torch.where((w_n > 0) & (u_n > 0), w_n / u_n, torch.ones_like(w_n))  # CLEAN: trust ratio via torch.where, no host branch
            p.sub_(self.lr * trust * upd)
        for i, p in enumerate(self.params):
            dist.broadcast(p, src=i % self.world)


class LambTrainer:
    def __init__(self, model, callbacks, clip=1.0):
        self.model, self.callbacks, self.clip = model, callbacks, clip
        decay = [p for n, p in model.named_parameters() if p.ndim > 1]
        no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
        self.lamb = ShardedLamb(decay)
        self.adam = torch.optim.Adam(no_decay, lr=6e-3)
        self.ids = torch.zeros(64, 128, dtype=torch.long, device="cuda")
        self.mlm = torch.full((64, 128), -100, dtype=torch.long, device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    def _step(self):
        logits = self.model(self.ids)
        self.loss = F.cross_entropy(logits.flatten(0, 1), self.mlm.flatten(), ignore_index=-100)
        self.loss.backward()
        grads = [p.grad for p in self.model.parameters()]
        flat = torch.cat([g.flatten() for g in grads])
        dist.all_reduce(flat)
        flat.div_(dist.get_world_size())
        torch._foreach_copy_(grads, [t.view_as(g) for t, g in zip(flat.split([g.numel() for g in grads]), grads)])
        self.global_norm = flat.norm()
        for cb in self.callbacks:
            cb.on_after_backward(self)
        if self.global_norm > self.clip:  # HAZARD: dynamic-control-flow
            torch._foreach_mul_(grads, self.clip / self.global_norm)
        self.lamb.step()
        self.adam.step()  # HAZARD: optimizer
        self.model.zero_grad(set_to_none=False)
        for cb in self.callbacks:
            cb.on_step_end(self)

    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph):
            self._step()

    def fit(self, loader):
        for ids, mlm in loader:
            self.ids.copy_(ids)  # CLEAN: in-place copy into the static batch
            self.mlm.copy_(mlm)
            self.graph.replay()
