"""Benchmark workloads: the two launch-bound models of the anchors, plus demo-size variants.

Each NAME has NAME_model() and NAME_inputs() factories, the shape cgkit's --model/--inputs expect.
The anchors were measured with TF32 matmuls on, so their factories turn it on too (same workload,
same precision); cgkit's own demo model stays in full fp32.
"""

import torch
from torch import nn


# The anchors' MLP: 16 x (Linear(512) + ReLU), batch 8.
def _anchor_precision():
    torch.backends.cuda.matmul.allow_tf32 = True


def mlp16x512_b8_model():
    _anchor_precision()
    return nn.Sequential(*[m for _ in range(16) for m in (nn.Linear(512, 512), nn.ReLU())])


def mlp16x512_b8_inputs():
    return (torch.randn(8, 512),)


class Block(nn.Module):
    """The anchors' transformer block: pre-norm attention (nn.MultiheadAttention) and MLP."""

    def __init__(self, dim, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        y = self.ln1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


# The anchors' small transformer: 6 blocks of width 512, batch 1, sequence 64.
def gpt6x512_b1s64_model():
    _anchor_precision()
    return nn.Sequential(*[Block(512, 8) for _ in range(6)])


def gpt6x512_b1s64_inputs():
    return (torch.randn(1, 64, 512),)


# The same transformer in full fp32 (TF32 off), the precision of issue 18's fuse probe
# (shared/anchors/fuse_probe.py): its matmuls are slower than TF32's, so fusing the elementwise
# work around them is a larger share of the step. A process-wide setting, so a workload of its own.
def gpt6x512_b1s64_fp32_model():
    torch.backends.cuda.matmul.allow_tf32 = False
    return nn.Sequential(*[Block(512, 8) for _ in range(6)])


def gpt6x512_b1s64_fp32_inputs():
    return gpt6x512_b1s64_inputs()


def _mlp(width, depth):
    return nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(width, width), nn.GELU())])


# Other sizes of cgkit's built-in demo (DemoMLP: 32 x (Linear(256) + GELU), batch 8). Until
# 2026-11-29 it was width 512, batch 32 (demo_w512_b32): its eager/floor
# ceiling (the most a graph could gain) was 4.3x to 4.8x on the H200, below the 5x bar.
def demo_w1024_b32_model():
    return _mlp(1024, 16)


def demo_w1024_b32_inputs():
    return (torch.randn(32, 1024),)


def demo_w2048_b64_model():
    return _mlp(2048, 16)


def demo_w2048_b64_inputs():
    return (torch.randn(64, 2048),)


def demo_w512_b32_model():
    return _mlp(512, 32)


def demo_w512_b32_inputs():
    return (torch.randn(32, 512),)


# cgkit's demo (32 x (Linear(256) + GELU), batch 8) with cuBLASLt as the preferred BLAS library: the
# choice under which Inductor's matmuls run eager's fast kernel (references/api-pytorch.md, "When the
# graphed step is slower than eager"). A process-wide setting, so a workload of its own.
def demo_cublaslt_model():
    torch.backends.cuda.preferred_blas_library("cublaslt")
    return _mlp(256, 32)


def demo_cublaslt_inputs():
    return (torch.randn(8, 256),)
