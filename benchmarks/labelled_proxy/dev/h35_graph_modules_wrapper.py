"""Helper that graphs a list of modules for training, as used by a detection codebase."""
import torch
import torch.nn as nn


def graph_modules(modules, sample_shapes, amp_dtype=torch.float16, warmup=3):
    samples = tuple((torch.randn(*shp, device="cuda", requires_grad=True),) for shp in sample_shapes)
    with torch.cuda.amp.autocast(dtype=amp_dtype):  # HAZARD: autocast-cache
        graphed = torch.cuda.make_graphed_callables(tuple(modules), samples, num_warmup_iters=warmup)
    return graphed


class FPNLevel(nn.Module):
    def __init__(self, c=256, clamp_val=50.0):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.gn = nn.GroupNorm(32, c)
        self.clamp_val = clamp_val

    def forward(self, x):
        y = torch.relu(self.gn(self.conv(x)))
        if y.abs().max() > self.clamp_val:  # HAZARD: dynamic-control-flow
            y = y.clamp(-self.clamp_val, self.clamp_val)
        y = y.clamp(-self.clamp_val, self.clamp_val)  # CLEAN: unconditional clamp, no host read
        frac_zero = (y == 0).float().mean().item()  # HAZARD: host-sync
        self.sparsity = frac_zero
        return y


def grad_monitor(module, grad_in, grad_out):
    module.last_grad_norm = grad_out[0].norm()


def build(levels=(64, 32, 16, 8), bs=4):
    fpn = [FPNLevel().cuda() for _ in levels]
    fpn[0].register_full_backward_hook(grad_monitor)  # HAZARD: api-misuse
    fpn[1].register_forward_pre_hook(lambda m, inp: None)  # HAZARD: api-misuse
    shapes = [(bs, 256, s, s) for s in levels]
    return graph_modules(fpn, shapes)
