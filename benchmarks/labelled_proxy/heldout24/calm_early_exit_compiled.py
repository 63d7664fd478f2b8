"""Confident adaptive early exit (CALM-style) for a document-classification encoder.

Two variants: `HostExitEncoder` stops the layer loop on the host when every token is
confident; `MaskedExitEncoder` runs all layers and freezes confident tokens on the
device.  Both are compiled from a dataclass config with max-autotune (CUDA graphs).
"""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class ExitConfig:
    d_model: int = 768
    n_layers: int = 12
    n_classes: int = 20
    threshold: float = 0.9
    compile_mode: str = "max-autotune"
    min_layers: int = 2


class _Base(nn.Module):
    def __init__(self, cfg: ExitConfig):
        super().__init__()
        self.cfg = cfg
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(cfg.d_model, 12, 4 * cfg.d_model, batch_first=True)
            for _ in range(cfg.n_layers)
        )
        self.heads = nn.ModuleList(nn.Linear(cfg.d_model, cfg.n_classes) for _ in range(cfg.n_layers))


class HostExitEncoder(_Base):
    def forward(self, h):
        thr = self.cfg.threshold  # HAZARD: python-scalar
        for i, (layer, head) in enumerate(zip(self.layers, self.heads)):
            h = layer(h)
            probs = F.softmax(head(h[:, 0]), dim=-1)
            conf = probs.max(dim=-1).values
            if i + 1 >= self.cfg.min_layers and conf.min() > thr:  # HAZARD: dynamic-control-flow
                return probs, i
        return probs, len(self.layers) - 1


class MaskedExitEncoder(_Base):
    def __init__(self, cfg: ExitConfig):
        super().__init__(cfg)
        self.register_buffer("thr", torch.tensor(cfg.threshold))

    def forward(self, h):
        thr = self.thr  # CLEAN: device buffer, updated in place by set_threshold
        done = torch.zeros(h.shape[0], dtype=torch.bool, device=h.device)
        out = torch.zeros(h.shape[0], self.cfg.n_classes, device=h.device)
        exit_at = torch.full((h.shape[0],), len(self.layers) - 1, device=h.device)
        for i, (layer, head) in enumerate(zip(self.layers, self.heads)):
            h = torch.where(done[:, None, None], h, layer(h))  # CLEAN: device-side freeze
            probs = F.softmax(head(h[:, 0]), dim=-1)
            newly = (~done) & (probs.max(dim=-1).values > thr)
            out = torch.where(newly[:, None], probs, out)
            exit_at = torch.where(newly, torch.full_like(exit_at, i), exit_at)
            done = done | newly
        out = torch.where(done[:, None], out, probs)
        saved = (len(self.layers) - 1 - exit_at).float().mean()
        self.layers_saved = saved.item()  # HAZARD: host-sync
        return out, exit_at


def build(kind: str, cfg: ExitConfig):
    cls = {"host": HostExitEncoder, "masked": MaskedExitEncoder}[kind]
    model = cls(cfg).cuda().eval()
    return torch.compile(model, mode=cfg.compile_mode)


@torch.no_grad()
def serve(batches, cfg=ExitConfig()):
    host_model = build("host", cfg)
    masked_model = build("masked", cfg)
    results = []
    for emb in batches:  # one request per batch, each with its own number of documents
        emb = emb.cuda(non_blocking=True)
        probs, exit_at = masked_model(emb)  # HAZARD: dynamic-shape
        results.append((probs.clone(), exit_at.clone()))  # CLEAN: cloned
    return results


def set_threshold(masked_model, value: float):
    masked_model.thr.fill_(value)


def calibrate(model, val_batches, cfg: ExitConfig, target_acc=0.97):
    for thr in (0.8, 0.85, 0.9, 0.95):
        cfg.threshold = thr
        correct = total = 0
        for emb, labels in val_batches:
            probs, _ = model(emb.cuda())
            correct += (probs.argmax(-1).cpu() == labels).sum().item()  # CLEAN: eager, after the call
            total += labels.numel()
        if correct / total >= target_acc:
            return thr
    return cfg.threshold
