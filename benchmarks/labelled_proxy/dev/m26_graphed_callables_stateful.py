"""Per-module graphs via make_graphed_callables for a speech encoder with running stats."""
import torch
import torch.nn as nn


class ConformerFF(nn.Module):
    def __init__(self, dim, expansion=4):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, dim * expansion)
        self.down = nn.Linear(dim * expansion, dim)
        self.register_buffer("act_mean", torch.zeros(dim))
        self.n_updates = 0
        self.trace = []

    def forward(self, x):
        h = self.down(torch.nn.functional.silu(self.up(self.norm(x))))
        self.act_mean.mul_(0.99).add_(0.01 * h.detach().mean((0, 1)))  # CLEAN: in-place update of a buffer, replayed each time
        self.n_updates += 1  # HAZARD: host-code
        self.trace.append(h.shape)  # HAZARD: host-code
        torch.cuda.empty_cache()  # HAZARD: host-code
        return x + 0.5 * h


class ConvModule(nn.Module):
    def __init__(self, dim, kernel=31):
        super().__init__()
        self.dw = nn.Conv1d(dim, dim, kernel, padding=kernel // 2, groups=dim)
        self.bn = nn.BatchNorm1d(dim)

    def forward(self, x):
        y = self.bn(self.dw(x.transpose(1, 2))).transpose(1, 2)
        self.last_out = y  # HAZARD: static-address
        return x + y


def build(dim=256, frames=400, bs=16):
    ff, conv = ConformerFF(dim).cuda(), ConvModule(dim).cuda()
    x = torch.randn(bs, frames, dim, device="cuda", requires_grad=True)
    x2 = torch.randn(bs, frames, dim, device="cuda", requires_grad=True)
    ff_g, conv_g = torch.cuda.make_graphed_callables((ff, conv), ((x,), (x2,)))
    conv.register_forward_hook(lambda m, i, o: None)  # CLEAN: hook registered after graphing
    return ff_g, conv_g


def train_step(ff_g, conv_g, feats, opt):
    loss = conv_g(ff_g(feats)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=False)
    return loss.item()
