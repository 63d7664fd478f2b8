"""Template-relevance model for one-step retrosynthesis (Morgan fingerprint -> MLP -> reaction-template
logits), built from a registry of model variants and trained with torch.cuda.make_graphed_callables."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MODEL_VARIANTS = {}

def variant(name):
    def deco(fn):
        MODEL_VARIANTS[name] = fn
        return fn
    return deco

class FingerprintEncoder(nn.Module):
    def __init__(self, fp_dim=2048, hidden=1024, fp_dropout=0.1):
        super().__init__()
        self.fp_dropout = fp_dropout
        self.net = nn.Sequential(nn.Linear(fp_dim, hidden), nn.ELU(), nn.Dropout(0.3), nn.Linear(hidden, hidden), nn.ELU())

    def forward(self, fp):
        if self.training:
            keep = torch.from_numpy((np.random.rand(*fp.shape) > self.fp_dropout).astype(np.float32))  # HAZARD: host-code
            fp = fp * keep.to(fp.device)
        return self.net(fp)

class TemplateHead(nn.Module):
    """v1: retired templates are given as a Python list of template ids."""

    def __init__(self, hidden, n_templates, blocked=()):
        super().__init__()
        self.fc = nn.Linear(hidden, n_templates)
        self.blocked = list(blocked)
        self.temperature = 1.0

    def forward(self, h):
        logits = self.fc(h)
        logits[:, self.blocked] = -1e4  # HAZARD: host-sync
        t = self.temperature  # HAZARD: python-scalar
        return logits / t

class MaskedTemplateHead(TemplateHead):
    """v2: retired templates live in a boolean buffer on the device."""

    def __init__(self, hidden, n_templates, blocked=()):
        super().__init__(hidden, n_templates, blocked)
        mask = torch.zeros(n_templates, dtype=torch.bool)
        mask[list(blocked)] = True
        self.register_buffer("blocked_mask", mask)

    def forward(self, h):
        return self.fc(h).masked_fill(self.blocked_mask, -1e4)  # CLEAN: masked_fill with a device buffer

@variant("tpl-relevance-v1")
def v1(n_templates=50_000, blocked=(17, 404, 9931)):
    return FingerprintEncoder(), TemplateHead(1024, n_templates, blocked)

@variant("tpl-relevance-v2")
def v2(n_templates=50_000, blocked=(17, 404, 9931)):
    return FingerprintEncoder(), MaskedTemplateHead(1024, n_templates, blocked)

class GradMonitor:
    def __init__(self):
        self.norms = []

    def __call__(self, module, grad_input, grad_output):
        self.norms.append(grad_output[0].detach().norm())

def train(loader, name="tpl-relevance-v1", epochs=30, batch=256):
    enc, head = MODEL_VARIANTS[name]()
    enc, head = enc.cuda().train(), head.cuda().train()
    head.register_full_backward_hook(GradMonitor())  # HAZARD: api-misuse
    fp = torch.randint(0, 2, (batch, 2048), device="cuda").float()
    h = torch.randn(batch, 1024, device="cuda", requires_grad=True)
    enc, head = torch.cuda.make_graphed_callables((enc, head), ((fp,), (h,)))
    opt = torch.optim.Adam(list(enc.parameters()) + list(head.parameters()), lr=1e-3)
    for epoch in range(epochs):
        head.temperature = max(0.5, 1.0 - 0.02 * epoch)
        for fps, tpl in loader:
            logits = head(enc(fps))  # CLEAN: graphed callables called positionally, in capture order
            loss = F.cross_entropy(logits, tpl)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=False)
        print(f"epoch {epoch}: top-1 loss {loss.item():.3f}")  # CLEAN: eager read after the optimizer step
    return enc, head

if __name__ == "__main__":
    data = [(torch.randint(0, 2, (256, 2048), device="cuda").float(), torch.randint(0, 50_000, (256,), device="cuda"))
            for _ in range(40)]
    train(data)
