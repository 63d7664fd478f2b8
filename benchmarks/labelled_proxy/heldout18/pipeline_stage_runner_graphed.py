"""Pipeline-parallel stage runner of a distributed-training utility library.

Each pipeline rank owns a `Stage` (a slice of the layers) and graphs it with
torch.cuda.make_graphed_callables. Activations and their grads travel between ranks
by P2P send/recv outside the graphs; a data-parallel gradient hook averages the stage
gradients across the replicas of the stage.
"""
import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn


class Stage(nn.Module):
    def __init__(self, layers, pos_table: np.ndarray, act_clip=50.0):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.pos_table = torch.from_numpy(pos_table.astype(np.float32))  # host copy, pageable
        self.act_clip = act_clip
        self.stats_stream = torch.cuda.Stream()
        self.register_buffer("act_peak", torch.zeros(()))

    def forward(self, h):
        pos = self.pos_table[: h.size(1)].to(h.device, non_blocking=True)  # HAZARD: pinned-memory
        h = h + pos
        for layer in self.layers:
            h = layer(h)
        if h.detach().abs().max() > self.act_clip:  # HAZARD: dynamic-control-flow
            h = h.clamp(-self.act_clip, self.act_clip)
        with torch.cuda.stream(self.stats_stream):  # HAZARD: stream
            self.act_peak.copy_(h.detach().abs().amax())
        return h


class StageRunner:
    def __init__(self, stage: Stage, micro_shape, dp_group, pp_prev, pp_next):
        self.stage = stage.cuda().train()
        self.dp_group, self.prev, self.next = dp_group, pp_prev, pp_next
        self.micro_shape = micro_shape
        self.recv_buf = torch.zeros(*micro_shape, device="cuda")
        self.grad_buf = torch.zeros(*micro_shape, device="cuda")

    def _dp_allreduce_hook(self, module, grad_input, grad_output):
        for p in module.parameters():
            if p.grad is not None:
                dist.all_reduce(p.grad, group=self.dp_group)
                p.grad.div_(dist.get_world_size(self.dp_group))

    def build(self):
        self.stage.register_full_backward_hook(self._dp_allreduce_hook)  # HAZARD: api-misuse
        sample = torch.randn(*self.micro_shape, device="cuda", requires_grad=self.prev is not None)
        self.stage = torch.cuda.make_graphed_callables(self.stage, (sample,), num_warmup_iters=3)

    def forward_micro(self, first_input=None):
        if self.prev is None:
            x = first_input
        else:
            dist.recv(self.recv_buf, src=self.prev)
            x = self.recv_buf.detach().requires_grad_(True)
        out = self.stage(x)  # CLEAN: graphed stage called with one positional tensor
        if self.next is not None:
            dist.send(out.detach(), dst=self.next)
        return x, out

    def backward_micro(self, x, out, loss=None):
        if self.next is None:
            loss.backward()
        else:
            dist.recv(self.grad_buf, src=self.next)
            out.backward(self.grad_buf)
        if self.prev is not None:
            dist.send(x.grad, dst=self.prev)

    def peak_activation(self):
        return self.stage.act_peak.item()  # CLEAN: host read between steps, outside any graph


def run_step(runner: StageRunner, micro_batches, loss_fn, optimizer):
    """Forward and backward each micro-batch in turn: the graphed stage has one set of
    static buffers, so a micro-batch's backward must replay before the next forward."""
    for mb in micro_batches:
        x, out = runner.forward_micro(mb.get("input"))
        loss = loss_fn(out, mb["target"]) if runner.next is None else None
        runner.backward_micro(x, out, loss)
    optimizer.step()
    optimizer.zero_grad(set_to_none=False)  # CLEAN: eager optimizer, grads kept allocated
