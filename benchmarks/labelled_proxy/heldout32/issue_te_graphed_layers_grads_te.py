# Transformer Engine make_graphed_callables: after graphing, the optimizer
# stopped moving the weights (grads stayed zero -- NVIDIA/TransformerEngine#869;
# fixed here by allocating .grad before graphing). Remaining problems in this
# reduced script: graphing refuses the model, and the validation numbers are
# off. TE 2.20 (new keyword names), torch 2.11, H200, FP8 delayed scaling.
import torch
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

H, FFN, HEADS, S, B = 1024, 4096, 16, 512, 4
recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")


class TokenDrop(torch.nn.Module):
    """Randomly zero whole tokens, then project (custom module, not TE's)."""

    def __init__(self, p):
        super().__init__()
        self.p = p
        self.proj = te.Linear(H, H, params_dtype=torch.bfloat16)
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(0)

    def forward(self, x):
        keep = torch.rand(x.shape[:-1], device=x.device, generator=self.gen) > self.p  # HAZARD: rng
        return self.proj(x * keep.unsqueeze(-1))


def make_layer():
    return te.TransformerLayer(H, FFN, HEADS, hidden_dropout=0.0, attention_dropout=0.0,
                               self_attn_mask_type="padding", params_dtype=torch.bfloat16).cuda()


layers = [make_layer(), make_layer()]
drop = TokenDrop(0.1).cuda()
params = [p for m in layers + [drop] for p in m.parameters()]
for p in params:
    p.grad = torch.zeros_like(p)  # CLEAN: grads allocated before graphing and never reset (TE issue 869)
layers[0].register_forward_pre_hook(lambda m, a: None)  # HAZARD: api-misuse


def sample():
    return torch.randn(S, B, H, device="cuda", dtype=torch.bfloat16, requires_grad=True)


mask = torch.zeros(B, 1, 1, S, dtype=torch.bool, device="cuda")
with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
    g0, g1 = te.make_graphed_callables(
        tuple(layers), ((sample(),), (sample(),)),
        sample_kwargs=({"attention_mask": mask}, {"attention_mask": mask}),
        enabled=True, recipe=recipe, cache_quantized_params=True)
g_drop = te.make_graphed_callables(drop, (sample(),), enabled=True, recipe=recipe)  # CLEAN: separate call without cache_quantized_params

opt = torch.optim.AdamW(params, lr=1e-4)
for step in range(10):
    for mb in range(2):
        x = torch.randn(S, B, H, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        with te.autocast(enabled=True, recipe=recipe):  # CLEAN: replay under te.autocast with the graphing recipe
            h = g_drop(x)
            h = g0(h, attention_mask=mask, is_first_microbatch=(mb == 0))  # CLEAN: declared keyword plus the flag
            h = g1(h, attention_mask=mask, is_first_microbatch=(mb == 0))
        h.float().pow(2).mean().backward()
    opt.step()

with torch.no_grad(), te.autocast(enabled=True, recipe=recipe):
    xv = torch.randn(S, B, H, device="cuda", dtype=torch.bfloat16)
    hv = g1(g0(g_drop(xv), attention_mask=mask), attention_mask=mask)  # HAZARD: api-misuse
print("val:", hv.float().abs().mean().item())
