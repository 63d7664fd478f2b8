"""Genotype classifier on DeepVariant-style pileup tensors (6 x 100 reads x 221 bp).

Training loop from `dv_lite/train.py`. The graphing follows the make_graphed_callables
example in the PyTorch CUDA notes (PR "graph stem + head": 1.6x faster steps on A100).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

CHANNELS = ("read_base", "base_quality", "mapping_quality", "strand", "supports_variant", "differs_from_ref")
GENOTYPES = 3   # hom-ref, het, hom-alt
BATCH = 64


class PileupStem(nn.Module):
    def __init__(self, channel_weights, read_gen=None):
        super().__init__()
        self.channel_weights = list(channel_weights)
        self.read_gen = read_gen
        self.conv = nn.Sequential(
            nn.Conv2d(6, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
            nn.AdaptiveAvgPool2d((4, 8)))

    def forward(self, x):
        w = torch.tensor(self.channel_weights, device=x.device).view(1, -1, 1, 1)  # HAZARD: host-sync
        x = x * w
        if self.training:
            # drop whole reads (rows) to mimic lower coverage
            keep = torch.rand(x.shape[0], 1, x.shape[2], 1, device=x.device, generator=self.read_gen) > 0.1  # HAZARD: rng
            x = x * keep
        return self.conv(x).flatten(1)


class GenotypeHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(128 * 32, 256), nn.ReLU(), nn.Dropout(0.2), nn.Linear(256, GENOTYPES))

    def forward(self, z):
        return self.fc(z)


def build(device="cuda"):
    gen = torch.Generator(device=device)
    gen.manual_seed(1234)
    stem = PileupStem([1.0, 0.5, 0.5, 1.0, 1.0, 1.0], read_gen=gen).to(device)
    head = GenotypeHead().to(device)
    act_stats = {}
    stem.register_forward_hook(lambda m, i, o: act_stats.__setitem__("stem", o.detach().float().std()))  # HAZARD: api-misuse
    x = torch.randn(BATCH, 6, 100, 221, device=device)
    z = torch.randn(BATCH, 128 * 32, device=device, requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        g_stem, g_head = torch.cuda.make_graphed_callables((stem, head), ((x,), (z,)))
    return stem, head, g_stem, g_head, act_stats


@torch.no_grad()
def evaluate(stem, head, g_stem, g_head, loader, device="cuda"):
    stem.eval()
    head.eval()
    correct = total = 0
    for x, y in loader:
        logits = g_head(g_stem(x.to(device)))  # CLEAN: eval mode, the graphed callables run the eager forward
        correct += (logits.argmax(1).cpu() == y).sum().item()
        total += y.numel()
    stem.train()
    head.train()
    return correct / total


def train(train_loader, val_loader, epochs=3, device="cuda"):
    stem, head, g_stem, g_head, act_stats = build(device)
    params = list(stem.parameters()) + list(head.parameters())
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9, nesterov=True)
    cls_w = torch.tensor([0.2, 1.0, 1.0], device=device)  # CLEAN: built once, outside any graph
    for epoch in range(epochs):
        for x, y in train_loader:                          # drop_last=True, batch of 64
            x = x.to(device, non_blocking=True)
            y = y.to(device, non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: autocast without its cache around the replays
                logits = g_head(g_stem(x))
                loss = F.cross_entropy(logits.float(), y, weight=cls_w)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        acc = evaluate(stem, head, g_stem, g_head, val_loader, device)
        print(f"epoch {epoch} loss {loss.item():.4f} val acc {acc:.4f}")


if __name__ == "__main__":
    from dv_lite.data import pileup_loader

    train(pileup_loader("HG002_chr1-19.tfrecord", BATCH, drop_last=True),
          pileup_loader("HG002_chr20.tfrecord", 256))
