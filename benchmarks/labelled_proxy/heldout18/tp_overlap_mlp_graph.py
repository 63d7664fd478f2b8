"""Tensor-parallel MLP block for a multi-GPU serving engine.

Column-parallel fc1 / row-parallel fc2, with the all-reduce of the *previous* block's
partial output overlapped on a communication stream. The block is captured once per
micro-batch shape with capture_begin/capture_end on a dedicated capture stream and
replayed by the engine's layer loop.
"""
import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class TPOverlapMLP(nn.Module):
    def __init__(self, hidden, ffn, tp_group, bias_table: np.ndarray, act_clip=64.0):
        super().__init__()
        self.tp_group = tp_group
        world = dist.get_world_size(tp_group)
        self.fc1 = nn.Linear(hidden, ffn // world, bias=False)
        self.gate = nn.Linear(hidden, ffn // world, bias=False)
        self.fc2 = nn.Linear(ffn // world, hidden, bias=False)
        self.bias_np = bias_table.astype(np.float32)  # refreshed by the checkpoint loader
        self.shift_pinned = torch.zeros(hidden).pin_memory()
        self.act_clip = act_clip  # retuned by the int8 calibration job
        self.comm_stream = torch.cuda.Stream()
        self.gate_stream = torch.cuda.Stream()

    def forward(self, x, prev_partial):
        with torch.cuda.stream(self.comm_stream):  # HAZARD: stream
            dist.all_reduce(prev_partial, group=self.tp_group)
        self.gate_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.gate_stream):  # CLEAN: forked here, joined right below
            g = torch.sigmoid(self.gate(x))
        torch.cuda.current_stream().wait_stream(self.gate_stream)
        shift = self.shift_pinned.to(x.device, non_blocking=True)  # CLEAN: pinned host buffer, the copy is recorded
        bias = torch.from_numpy(self.bias_np).to(x.device, non_blocking=True)  # HAZARD: pinned-memory
        h = F.silu(self.fc1(x + shift)) * g
        clip = self.act_clip  # HAZARD: python-scalar
        h = h.clamp(-clip, clip)
        out = self.fc2(h) + bias
        torch.cuda.synchronize()  # HAZARD: host-sync
        torch.cuda.current_stream().wait_stream(self.comm_stream)
        return out, prev_partial


class BlockGraphCache:
    """One graph per (micro-batch, seq) shape; all shapes share one pool."""

    def __init__(self, block: TPOverlapMLP, hidden: int):
        self.block, self.hidden = block, hidden
        self.capture_stream = torch.cuda.Stream()
        self.pool = None
        self.entries = {}

    @torch.no_grad()
    def _capture(self, shape):
        x = torch.zeros(*shape, self.hidden, device="cuda")
        partial = torch.zeros_like(x)
        self.capture_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.capture_stream):
            for _ in range(3):
                self.block(x, partial)
            g = torch.cuda.CUDAGraph()
            g.capture_begin(pool=self.pool)  # CLEAN: captured on the side stream it warmed up on
            out, reduced = self.block(x, partial)
            g.capture_end()
        torch.cuda.current_stream().wait_stream(self.capture_stream)
        self.pool = g.pool()
        self.entries[shape] = (g, x, partial, out, reduced)

    @torch.no_grad()
    def run(self, x, prev_partial):
        shape = tuple(x.shape[:2])
        if shape not in self.entries:
            self._capture(shape)
        g, sx, sp, out, reduced = self.entries[shape]
        sx.copy_(x)  # CLEAN: copy_ into the static input
        sp.copy_(prev_partial)
        g.replay()
        return out.clone(), reduced.clone()

    def set_act_clip(self, value: float):
        self.block.act_clip = float(value)

    def reload_bias(self, table: np.ndarray):
        self.block.bias_np = table.astype(np.float32)
