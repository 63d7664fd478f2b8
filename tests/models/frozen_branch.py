"""A model whose forward branches on Python state: eager alternates, a graph freezes one branch.

cgkit smoke must report such a capture as `correct: false`, never as a pass.
"""

import torch
from torch import nn


class Alternating(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(64, 64)
        self.calls = 0

    def forward(self, x):
        self.calls += 1  # Python-side state: runs at capture, not on replay
        y = self.linear(x)
        return y * 2 if self.calls % 2 else y


def build():
    return Alternating()


def example():
    return (torch.randn(8, 64),)
