"""Weight-only int4 quantization toolkit: `quantize_()` swaps nn.Linear for a packed
int4 linear with group-wise scales, then the quantized model is compiled with
mode="max-autotune" for serving. A calibration runner measures perplexity drift
with a no-cudagraphs compile.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def pack_int4(w, group_size):
    out_f, in_f = w.shape
    g = w.reshape(out_f, in_f // group_size, group_size)
    scale = g.abs().amax(-1, keepdim=True).clamp_min(1e-6) / 7.0
    q = torch.clamp(torch.round(g / scale), -8, 7).to(torch.int8) + 8
    packed = (q[..., 0::2] | (q[..., 1::2] << 4)).to(torch.uint8)
    return packed.reshape(out_f, -1), scale.squeeze(-1)


class Int4WeightOnlyLinear(nn.Module):
    def __init__(self, linear: nn.Linear, group_size=128):
        super().__init__()
        packed, scales = pack_int4(linear.weight.detach(), group_size)
        self.register_buffer("packed", packed)
        self.register_buffer("scales", scales.to(torch.bfloat16))
        self.register_buffer("act_scale", torch.ones(linear.in_features, dtype=torch.bfloat16))
        self.bias = linear.bias
        self.group_size = group_size
        self.smooth_alpha = 0.0  # SmoothQuant-style strength, tuned per deployment

    def _dequant(self):
        lo = (self.packed & 0xF).to(torch.int8) - 8
        hi = (self.packed >> 4).to(torch.int8) - 8
        q = torch.stack([lo, hi], dim=-1).reshape(self.packed.size(0), -1, self.group_size)
        return (q.to(torch.bfloat16) * self.scales.unsqueeze(-1)).reshape(self.packed.size(0), -1)

    def forward(self, x):
        if self.act_scale.abs().max() == 0:  # HAZARD: dynamic-control-flow
            return F.linear(x, self._dequant(), self.bias)
        alpha = self.smooth_alpha  # HAZARD: python-scalar
        s = self.act_scale.pow(alpha)
        w = self._dequant() * s
        return F.linear(x / s, w, self.bias)  # CLEAN: out-of-place scaling of an intermediate


def quantize_(model: nn.Module, group_size=128):
    for name, child in model.named_children():
        if isinstance(child, nn.Linear) and child.in_features % group_size == 0:
            setattr(model, name, Int4WeightOnlyLinear(child, group_size))
        else:
            quantize_(child, group_size)
    return model


class QuantizedLM(nn.Module):
    def __init__(self, base: nn.Module, input_scale=1.0):
        super().__init__()
        self.base = base
        self.input_scale = input_scale

    def forward(self, hidden):
        hidden.mul_(self.input_scale)  # HAZARD: static-address
        return self.base(hidden)


def build_serving_model(base, group_size=128):
    model = QuantizedLM(quantize_(base, group_size)).cuda().to(torch.bfloat16).eval()
    return torch.compile(model, mode="max-autotune")


def build_calibration_model(base, group_size=128):
    model = QuantizedLM(quantize_(base, group_size)).cuda().to(torch.bfloat16).eval()
    return torch.compile(model, mode="max-autotune-no-cudagraphs")  # CLEAN: no CUDA graphs for ragged calibration


@torch.no_grad()
def tune_alpha(serving_model, samples, alphas=(0.0, 0.25, 0.5)):
    results = {}
    for a in alphas:
        for m in serving_model.modules():
            if isinstance(m, Int4WeightOnlyLinear):
                m.smooth_alpha = a
        errs = []
        for hidden, target in samples:  # a few thousand sequences of their natural length
            out = serving_model(hidden.cuda().to(torch.bfloat16))  # HAZARD: dynamic-shape
            errs.append((out.float() - target.cuda()).pow(2).mean().clone())  # CLEAN: reduced and cloned before the next call
        results[a] = torch.stack(errs).mean().item()
    return results
