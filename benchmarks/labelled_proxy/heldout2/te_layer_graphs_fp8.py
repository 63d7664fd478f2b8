"""Per-layer CUDA graphs for a Transformer Engine model trained in FP8 (Megatron-like setup)."""
import torch
import torch.nn as nn
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format


class GatedBlock(nn.Module):
    def __init__(self, hidden=4096, ffn=14336, heads=32):
        super().__init__()
        self.attn = te.MultiheadAttention(hidden, heads, attn_mask_type="causal")
        self.ln = te.LayerNorm(hidden)
        self.fc1 = te.Linear(hidden, 2 * ffn, bias=False)
        self.fc2 = te.Linear(ffn, hidden, bias=False)
        self.check_finite = True
        self.token_drop_gen = torch.Generator(device="cuda")
        self.token_drop_gen.manual_seed(1234)

    def forward(self, x):
        keep = torch.rand(x.shape[:2], device=x.device, generator=self.token_drop_gen) > 0.05  # HAZARD: rng
        x = x * keep.unsqueeze(-1).to(x.dtype)
        x = x + self.attn(x)
        a, b = self.fc1(self.ln(x)).chunk(2, dim=-1)
        y = x + self.fc2(torch.nn.functional.silu(a) * b)
        if self.check_finite and not torch.isfinite(y).all():  # HAZARD: dynamic-control-flow
            raise FloatingPointError("non-finite activations")
        return y


def grad_norm_hook(module, grad_in, grad_out):
    module.last_grad_norm = grad_out[0].norm()


def build_graphed(num_layers=4, seq=4096, micro_bs=1, hidden=4096):
    layers = [GatedBlock(hidden).cuda() for _ in range(num_layers)]
    layers[-1].register_full_backward_hook(grad_norm_hook)  # HAZARD: api-misuse
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
    sample_args = tuple(
        (torch.randn(seq, micro_bs, hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True),)
        for _ in layers
    )
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        graphed = te.make_graphed_callables(
            tuple(layers), sample_args, num_warmup_iters=3, enabled=True, recipe=recipe,
        )
    return list(graphed), layers, recipe


def train(batches, steps=1000):
    graphed, layers, recipe = build_graphed()
    opt = torch.optim.AdamW([p for l in layers for p in l.parameters()], lr=1.5e-4, fused=True)
    for step, x in zip(range(steps), batches):
        x = x.cuda(non_blocking=True).requires_grad_(True)
        with te.autocast(enabled=True, recipe=recipe):  # CLEAN: TE FP8 autocast around replay, not the torch autocast weight cache
            h = x
            for layer in graphed:
                h = layer(h)
        loss = h.float().pow(2).mean()
        loss.backward()
        opt.step()  # CLEAN: optimizer stays outside the captured layers
        opt.zero_grad(set_to_none=True)
        if step % 50 == 0:
            print(step, loss.item())
