"""Leaf-disease classifier for a field-scouting app (38 crop/disease classes, PlantVillage
labels plus in-field photos). The network is graphed with torch.cuda.make_graphed_callables
inside a bf16 builder; a lesion-sparsity auxiliary loss uses the class-activation map.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

N_CLS = 38


class LeafNet(nn.Module):
    def __init__(self, class_prior):
        super().__init__()
        self.class_prior = class_prior                                   # np.ndarray (38,), field frequencies
        self.jitter_gen = torch.Generator(device="cuda").manual_seed(17)
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.SiLU())
        self.blocks = nn.Sequential(*[nn.Sequential(nn.Conv2d(c, 2 * c, 3, stride=2, padding=1), nn.BatchNorm2d(2 * c), nn.SiLU())
                                      for c in (32, 64, 128)])
        self.cls = nn.Conv2d(256, N_CLS, 1)

    def forward(self, img):
        if self.training:
            gain = 1 + 0.2 * (torch.rand(img.shape[0], 3, 1, 1, device=img.device, generator=self.jitter_gen) - 0.5)  # HAZARD: rng
            img = img * gain
        cam = self.cls(self.blocks(self.stem(img)))                     # (B, 38, 14, 14)
        prior = torch.from_numpy(np.log(self.class_prior)).float().cuda()  # HAZARD: pinned-memory
        logits = cam.mean((2, 3)) + 0.1 * prior
        heat = cam.amax(1).sigmoid()
        lesion = heat[heat > 0.5]  # HAZARD: dynamic-shape
        aux = lesion.mean() if lesion.numel() else heat.sum() * 0
        healthy = torch.where(heat > 0.5, 0.0, heat).mean()  # CLEAN: torch.where keeps the shape static
        return logits, aux + healthy


@torch.autocast("cuda", dtype=torch.bfloat16)  # HAZARD: autocast-cache
def build_graphed(model, batch=64):
    sample = torch.randn(batch, 3, 224, 224, device="cuda")
    return torch.cuda.make_graphed_callables(model, (sample,), num_warmup_iters=3)


def build_export(model, batch=64):
    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: cache disabled, as make_graphed_callables requires
        return torch.cuda.make_graphed_callables(model, (torch.randn(batch, 3, 224, 224, device="cuda"),))


def train(loader, prior, epochs=20):
    model = LeafNet(prior).cuda().train()
    g_model = build_graphed(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    for epoch in range(epochs):
        for img, y in loader:
            with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
                logits, aux = g_model(img)
            loss = F.cross_entropy(logits.float(), y) + 0.05 * aux.float()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        acc = sum((g_model(img)[0].argmax(1) == y).float().mean() for img, y in loader) / len(loader)  # CLEAN: eval mode falls back to the eager forward
    return model, acc.item()


if __name__ == "__main__":
    prior = np.full(N_CLS, 1.0 / N_CLS, dtype=np.float64)
    data = [(torch.rand(64, 3, 224, 224, device="cuda"), torch.randint(0, N_CLS, (64,), device="cuda")) for _ in range(8)]
    model, acc = train(data, prior, epochs=1)
    print(f"val acc {acc:.3f}")
