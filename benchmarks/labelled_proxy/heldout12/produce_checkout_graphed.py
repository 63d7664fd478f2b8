"""Self-checkout produce recognition: fine-tune for a new season's PLU list.

The scale camera sees loose produce on the weighing plate. Each store's edge
box fine-tunes backbone + PLU head overnight on the day's confirmed lookups.
Both modules are graphed with torch.cuda.make_graphed_callables to keep the
small-batch step fast on the store GPU.
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

N_PLU, FEAT, BATCH = 600, 256, 32
nn_fallback_bank = []


class ProduceBackbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.blocks = nn.Sequential(
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
            nn.Conv2d(128, FEAT, 3, stride=2, padding=1), nn.BatchNorm2d(FEAT), nn.ReLU(),
        )

    def forward(self, x):
        if self.training and random.random() < 0.5:  # HAZARD: host-code
            x = x.flip(-1)
        return F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1).flatten(1)


class PLUHead(nn.Module):
    def __init__(self, seed=5):
        super().__init__()
        self.fc = nn.Linear(FEAT, N_PLU)
        self.noise_gen = torch.Generator(device="cuda")
        self.noise_gen.manual_seed(seed)

    def forward(self, f):
        if self.training:
            f = f + 0.1 * torch.randn(f.shape, device=f.device, generator=self.noise_gen)  # HAZARD: rng
        return self.fc(F.dropout(f, 0.2, self.training))  # CLEAN: dropout on the default CUDA generator


def remember_embedding(module, inputs, output):
    nn_fallback_bank.append(output.detach())


def log_confidence(module, inputs, output):
    module.last_conf = output.softmax(-1).amax(-1).mean().item()


def build(backbone, head):
    backbone.register_forward_hook(remember_embedding)  # HAZARD: api-misuse
    x = torch.randn(BATCH, 3, 224, 224, device="cuda")
    f = torch.randn(BATCH, FEAT, device="cuda", requires_grad=True)
    with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        g_backbone, g_head = torch.cuda.make_graphed_callables((backbone, head), ((x,), (f,)))
    head.register_forward_hook(log_confidence)  # CLEAN: registered after graphing, runs outside the graphs
    return g_backbone, g_head


def nightly_finetune(loader, val_batch, epochs=3):
    backbone, head = ProduceBackbone().cuda().train(), PLUHead().cuda().train()
    g_backbone, g_head = build(backbone, head)
    opt = torch.optim.SGD(list(backbone.parameters()) + list(head.parameters()), lr=0.01, momentum=0.9)
    for _ in range(epochs):
        for imgs, plu in loader:
            with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):  # CLEAN: autocast cache disabled
                logits = g_head(g_backbone(imgs))  # CLEAN: graphed callables called with positional tensors
                loss = F.cross_entropy(logits, plu, label_smoothing=0.1)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    backbone.eval()
    head.eval()
    with torch.no_grad():
        val_logits = g_head(g_backbone(val_batch[0]))  # CLEAN: eval mode falls back to the eager forwards
        acc = (val_logits.argmax(-1) == val_batch[1]).float().mean().item()
    return backbone, head, acc


if __name__ == "__main__":
    data = [(torch.rand(BATCH, 3, 224, 224, device="cuda"), torch.randint(0, N_PLU, (BATCH,), device="cuda"))
            for _ in range(200)]
    _, _, acc = nightly_finetune(data, data[0])
    print(f"store model val acc {acc:.3f}")
