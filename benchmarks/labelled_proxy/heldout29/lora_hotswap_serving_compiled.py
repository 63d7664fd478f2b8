"""Multi-tenant LoRA serving: one base model, adapters hot-swapped between requests.

The base model forward is compiled with mode="reduce-overhead". Adapters of the
same rank are copied into the live LoRA weights; per-row routing over a stacked
adapter bank serves mixed batches.
"""
import torch
import torch.nn as nn
from safetensors.torch import load_file


class LoraLinear(nn.Module):
    def __init__(self, base: nn.Linear, r=16, alpha=32, n_slots=8):
        super().__init__()
        self.base, self.r = base, r
        self.lora_A = nn.Linear(base.in_features, r, bias=False)
        self.lora_B = nn.Linear(r, base.out_features, bias=False)
        nn.init.zeros_(self.lora_B.weight)
        self.scaling = alpha / r
        self.register_buffer("bank_A", torch.zeros(n_slots, r, base.in_features))
        self.register_buffer("bank_B", torch.zeros(n_slots, base.out_features, r))
        self.register_buffer("bank_scale", torch.ones(n_slots))

    def forward(self, x, slot_ids=None):
        y = self.base(x)
        if slot_ids is not None:
            A = self.bank_A.index_select(0, slot_ids)  # CLEAN: gather with a CUDA index tensor
            B = self.bank_B.index_select(0, slot_ids)
            s = self.bank_scale.index_select(0, slot_ids)[:, None, None]
            return y + torch.einsum("bsr,bor->bso", torch.einsum("bsi,bri->bsr", x, A), B) * s
        if self.lora_B.weight.abs().sum() == 0:  # HAZARD: dynamic-control-flow
            return y
        return y + self.lora_B(self.lora_A(x)) * self.scaling  # HAZARD: python-scalar


def lora_layers(model):
    return {n: m for n, m in model.named_modules() if isinstance(m, LoraLinear)}


class LoraServer:
    def __init__(self, model, tokenizer, adapter_dir, device="cuda"):
        self.model, self.tok, self.dir, self.device = model.to(device).eval(), tokenizer, adapter_dir, device
        self.layers = lora_layers(self.model)
        self.fwd = torch.compile(self.model.forward, mode="reduce-overhead")
        self.slots = {}

    def activate(self, name):
        state = load_file(f"{self.dir}/{name}/adapter_model.safetensors", device=self.device)
        cfg = torch.load(f"{self.dir}/{name}/adapter_config.pt", weights_only=True)
        for lname, layer in self.layers.items():
            A, B = state[f"{lname}.lora_A.weight"], state[f"{lname}.lora_B.weight"]
            if A.shape[0] == layer.r:
                layer.lora_A.weight.copy_(A)  # CLEAN: same-rank adapter copied into the live parameter
                layer.lora_B.weight.copy_(B)
            else:
                layer.lora_A.weight, layer.lora_B.weight = nn.Parameter(A), nn.Parameter(B)  # HAZARD: static-address
                layer.r = A.shape[0]
            layer.scaling = cfg["lora_alpha"] / layer.r

    def load_bank(self, names):
        cfgs = {n: torch.load(f"{self.dir}/{n}/adapter_config.pt", weights_only=True) for n in names}
        for slot, name in enumerate(names):
            state = load_file(f"{self.dir}/{name}/adapter_model.safetensors", device=self.device)
            for lname, layer in self.layers.items():
                layer.bank_A[slot].copy_(state[f"{lname}.lora_A.weight"])  # CLEAN: in-place write into a registered buffer
                layer.bank_B[slot].copy_(state[f"{lname}.lora_B.weight"])
                layer.bank_scale[slot].fill_(cfgs[name]["lora_alpha"] / layer.r)
            self.slots[name] = slot

    @torch.inference_mode()
    def score(self, prompts, adapter):
        self.activate(adapter)
        enc = self.tok(prompts, padding="longest", return_tensors="pt").to(self.device)
        logits = self.fwd(enc.input_ids, attention_mask=enc.attention_mask)  # HAZARD: dynamic-shape
        return logits[:, -1].float().log_softmax(-1).clone()

    @torch.inference_mode()
    def score_mixed(self, prompts, adapters):
        enc = self.tok(prompts, padding="max_length", max_length=256, truncation=True,
                       return_tensors="pt").to(self.device)
        slot_ids = torch.tensor([self.slots[a] for a in adapters], device=self.device)  # CLEAN: eager upload, outside the compiled forward
        logits = self.fwd(enc.input_ids, attention_mask=enc.attention_mask, slot_ids=slot_ids)  # CLEAN: fixed padded length
        return logits[:, -1].float().log_softmax(-1).clone()
