"""ComfyUI custom node "Prompt Adapter Trainer (FP8)".

Trains a small prompt adapter on top of frozen text-encoder features, inside the ComfyUI
process, with Transformer Engine layers graphed by te.pytorch.make_graphed_callables.
"""
import torch
import torch.nn as nn
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling

D, HEADS, SEQ, BATCH = 768, 12, 77, 8
ADAPTER_CFG = {"strength": 1.0}


class AdapterMix(nn.Module):
    """Plain torch module, graphed with torch.cuda.make_graphed_callables."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(D, D)
        self.gen = torch.Generator(device="cuda").manual_seed(7)

    def forward(self, base, adapted):
        s = ADAPTER_CFG["strength"]  # HAZARD: python-scalar
        noise = torch.randn(base.shape, device=base.device, generator=self.gen)  # HAZARD: rng
        return base + s * self.proj(adapted) + 0.01 * noise


class PromptAdapterTrainer:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"conditioning": ("CONDITIONING",), "steps": ("INT", {"default": 200}),
                             "strength": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 2.0})}}

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "train"
    CATEGORY = "conditioning/adapters"

    def _build(self):
        self.recipe = DelayedScaling()
        self.layers = [te.TransformerLayer(D, 4 * D, HEADS, hidden_dropout=0.0, attention_dropout=0.0,
                                           params_dtype=torch.bfloat16).cuda() for _ in range(2)]
        self.layers[0].register_forward_pre_hook(lambda m, a: None)  # HAZARD: api-misuse
        samples = tuple((torch.randn(SEQ, BATCH, D, device="cuda", dtype=torch.bfloat16, requires_grad=True),)
                        for _ in self.layers)
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            self.layers = te.make_graphed_callables(tuple(self.layers), samples, enabled=True,
                                                    recipe=self.recipe, cache_quantized_params=True)
        self.mix = AdapterMix().cuda().to(torch.bfloat16)
        mix_args = (torch.randn(SEQ, BATCH, D, device="cuda", dtype=torch.bfloat16),
                    torch.randn(SEQ, BATCH, D, device="cuda", dtype=torch.bfloat16, requires_grad=True))
        self.mix = torch.cuda.make_graphed_callables(self.mix, mix_args)  # CLEAN: separate torch call, no hooks
        self.layers[1].register_forward_hook(lambda m, a, o: None)  # CLEAN: hook added after graphing
        params = [p for l in self.layers for p in l.parameters()] + list(self.mix.parameters())
        self.opt = torch.optim.AdamW(params, lr=1e-4)  # CLEAN: stepped eagerly, outside the graphs

    def train(self, conditioning, steps, strength):
        if not hasattr(self, "layers"):
            self._build()
        ADAPTER_CFG["strength"] = strength
        base = conditioning[0][0].to("cuda", torch.bfloat16)[:, :SEQ].transpose(0, 1).expand(SEQ, BATCH, D)
        base = base.contiguous()
        target = base.detach() * 1.05
        for i in range(steps):
            x = base.clone().requires_grad_(True)
            with te.autocast(enabled=True, recipe=self.recipe):  # CLEAN: TE autocast at replay
                h = x
                for layer in self.layers:
                    h = layer(h, is_first_microbatch=True)  # CLEAN: one microbatch per step, flag passed on every replay
                out = self.mix(base, h)
            loss = (out.float() - target.float()).pow(2).mean()
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
        with torch.no_grad():
            final = out.detach().transpose(0, 1).float().cpu()
        return ([[final[:1], conditioning[0][1]]],)


NODE_CLASS_MAPPINGS = {"PromptAdapterTrainer": PromptAdapterTrainer}
