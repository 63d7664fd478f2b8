"""Multi-adapter LoRA serving under reduce-overhead: two ways of switching the active adapter."""
import torch
import torch.nn as nn


class NaiveLoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, adapters):
        super().__init__()
        self.base = base
        self.adapters = adapters
        first = next(iter(adapters.values()))
        self.lora_A = nn.Parameter(first["A"], requires_grad=False)
        self.lora_B = nn.Parameter(first["B"], requires_grad=False)
        self.scaling = first["alpha"] / first["A"].shape[0]

    def set_adapter(self, name):
        ad = self.adapters[name]
        self.lora_A, self.lora_B = (nn.Parameter(ad[k], requires_grad=False) for k in ("A", "B"))  # HAZARD: static-address
        self.scaling = ad["alpha"] / ad["A"].shape[0]

    def forward(self, x):
        delta = (x @ self.lora_A.T) @ self.lora_B.T
        return self.base(x) + delta * self.scaling  # HAZARD: python-scalar


class StaticLoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, adapters, max_rank=64):
        super().__init__()
        self.base = base
        self.adapters = adapters
        self.register_buffer("lora_A", torch.zeros(max_rank, base.in_features))
        self.register_buffer("lora_B", torch.zeros(base.out_features, max_rank))
        self.register_buffer("scaling", torch.zeros(()))

    @torch.no_grad()
    def set_adapter(self, name):
        ad = self.adapters[name]
        r = ad["A"].shape[0]
        self.lora_A.zero_()
        self.lora_B.zero_()
        self.lora_A[:r].copy_(ad["A"])  # CLEAN: adapter weights copied into fixed buffers in place
        self.lora_B[:, :r].copy_(ad["B"])
        self.scaling.fill_(ad["alpha"] / r)  # CLEAN: scale kept in a device buffer updated in place

    def forward(self, x):
        return self.base(x) + ((x @ self.lora_A.T) @ self.lora_B.T) * self.scaling


class Server:
    def __init__(self, layer: nn.Module):
        self.layer = layer.cuda().eval()
        self.fwd = torch.compile(self.layer, mode="reduce-overhead")
        self.history = []

    @torch.inference_mode()
    def handle(self, requests):
        outs = []
        for req in requests:
            self.layer.set_adapter(req["adapter"])
            y = self.fwd(req["x"].cuda())
            outs.append(y.float().cpu())  # CLEAN: result copied to the host before the next call
            self.history.append(y[:, :8])  # HAZARD: static-address
        return outs


def build(in_f=4096, out_f=4096, n_adapters=4, rank=16):
    adapters = {
        f"task{i}": {"A": torch.randn(rank, in_f, device="cuda") * 0.01,
                     "B": torch.zeros(out_f, rank, device="cuda"), "alpha": 16.0 * (i + 1)}
        for i in range(n_adapters)
    }
    base = nn.Linear(in_f, out_f)
    return Server(NaiveLoRALinear(base, adapters)), Server(StaticLoRALinear(nn.Linear(in_f, out_f), adapters))
