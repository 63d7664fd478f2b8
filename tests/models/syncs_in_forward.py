"""A model whose forward reads a tensor value on the host: capture must fail, smoke must explain it."""

import torch
from torch import nn


class Thresholded(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(32, 32)

    def forward(self, x):
        y = self.linear(x)
        if y.mean().item() > 0:  # a host sync: not allowed while a graph is being captured
            y = y * 0.5
        return y


def build():
    return Thresholded()


def example():
    return (torch.randn(4, 32),)
