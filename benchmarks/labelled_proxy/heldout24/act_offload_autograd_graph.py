"""Activation offload for a long-context encoder: whole training step in one CUDA graph.

A custom autograd Function parks the wide MLP activation in pinned host memory on a
D2H stream during forward and streams it back on an H2D stream in backward.  The
memory controller lowers or raises the offload share from the outside.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class OffloadGelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, host_buf, d2h, h2d):
        y = F.gelu(x)
        d2h.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(d2h):  # CLEAN: forked by wait_stream, joined through h2d in backward
            host_buf.copy_(x.detach(), non_blocking=True)
        ctx.done = torch.cuda.Event()
        ctx.done.record(d2h)
        ctx.streams = (d2h, h2d)
        ctx.save_for_backward(host_buf)
        return y

    @staticmethod
    def backward(ctx, gy):
        (host_buf,) = ctx.saved_tensors
        d2h, h2d = ctx.streams
        h2d.wait_event(ctx.done)
        h2d.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(h2d):
            x = host_buf.to(gy.device, non_blocking=True)  # CLEAN: pinned host buffer, the copy is recorded
            grad = torch.ops.aten.gelu_backward(gy, x)
        torch.cuda.current_stream().wait_stream(h2d)
        return grad, None, None, None


class OffloadedMLP(nn.Module):
    def __init__(self, d, hidden, tokens):
        super().__init__()
        self.up = nn.Linear(d, hidden)
        self.down = nn.Linear(hidden, d)
        self.host_buf = torch.empty(tokens, hidden, pin_memory=True)
        self.d2h, self.h2d = torch.cuda.Stream(), torch.cuda.Stream()
        self.offload = True

    def forward(self, x):
        h = self.up(x)
        if self.offload:  # HAZARD: python-scalar
            h = OffloadGelu.apply(h, self.host_buf, self.d2h, self.h2d)
        else:
            h = F.gelu(h)
        return self.down(h)


class OffloadTrainer:
    def __init__(self, depth=6, d=1024, hidden=4096, batch=4, seq=2048):
        tokens = batch * seq
        self.blocks = nn.ModuleList([OffloadedMLP(d, hidden, tokens) for _ in range(depth)]).cuda()
        self.opt = torch.optim.AdamW(self.blocks.parameters(), lr=2e-4, capturable=True)  # CLEAN: capturable
        self.static_x = torch.zeros(tokens, d, device="cuda")
        self.static_y = torch.zeros(tokens, d, device="cuda")
        self.gnorm = torch.zeros((), device="cuda")
        self.stats_stream = torch.cuda.Stream()
        self.graph = torch.cuda.CUDAGraph()

    def _step(self):
        h = self.static_x
        for blk in self.blocks:
            h = h + blk(h)
        loss = F.mse_loss(h, self.static_y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(self.blocks.parameters(), 1.0)  # CLEAN: capturable clip
        with torch.cuda.stream(self.stats_stream):  # HAZARD: stream
            self.gnorm.copy_(norm)
        self.opt.step()
        self.opt.zero_grad(set_to_none=False)
        return loss

    def capture(self, warmup=3):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph):
            self.static_loss = self._step()

    def train_step(self, x_cpu, y_cpu):
        self.static_x.copy_(x_cpu, non_blocking=True)  # CLEAN: copy_ into the static input
        self.static_y = y_cpu.cuda(non_blocking=True)  # HAZARD: static-address
        self.graph.replay()
        return self.static_loss.item()  # CLEAN: read after replay, outside the graph

    def set_memory_budget(self, free_gib):
        keep = max(1, int(free_gib // 4))
        for i, blk in enumerate(self.blocks):
            blk.offload = i >= keep

    def lr_warmup(self, step, base=2e-4, warm=500):
        for g in self.opt.param_groups:
            g["lr"] = base * min(1.0, (step + 1) / warm)  # HAZARD: optimizer
