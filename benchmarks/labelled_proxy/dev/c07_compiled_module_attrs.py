"""Fine-tuning with a compiled module whose forward reads mutable attributes."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class ResidualMLP(nn.Module):
    def __init__(self, dim, depth, mode="pre"):
        super().__init__()
        self.mode = mode
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(depth))
        self.norms = nn.ModuleList(nn.LayerNorm(dim) for _ in range(depth))
        self.drop_path = 0.0
        self.input_scale = 1.0

    def forward(self, x):
        x.mul_(self.input_scale)  # HAZARD: static-address
        for lin, ln in zip(self.layers, self.norms):
            if self.mode == "pre":  # CLEAN: string comparison on a constructor setting
                h = lin(ln(x))
            else:
                h = ln(lin(x))
            h = F.dropout(h, p=self.drop_path, training=self.training)  # HAZARD: python-scalar
            x = x + h
        return x


def train(loader, epochs=10):
    net = ResidualMLP(768, 12).cuda()
    model = torch.compile(net, mode="reduce-overhead")
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4)
    total = epochs * len(loader)
    step = 0
    for epoch in range(epochs):
        for x, y in loader:
            x, y = x.cuda(), y.cuda()
            net.drop_path = 0.1 * step / total
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
        lr = 2e-4 * 0.5 * (1 + math.cos(math.pi * epoch / epochs))
        for g in opt.param_groups:
            g["lr"] = lr  # CLEAN: eager optimizer outside the compiled module, no graph captured it
