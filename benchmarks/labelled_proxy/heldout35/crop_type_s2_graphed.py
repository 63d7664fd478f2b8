"""Crop-type mapping from Sentinel-2 pixel-set time series (PSE + temporal attention).

The three stages are graphed with torch.cuda.make_graphed_callables for training.

    python crop_type_s2_graphed.py --parcels parcels.npz --epochs 40 --batch 128
"""
import argparse
import csv
import logging
import os
import random
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("s2crop")

BANDS = ["B02", "B03", "B04", "B05", "B06", "B07", "B08", "B8A", "B11", "B12", "CLD"]


@dataclass
class CropConfig:
    n_classes: int = 20
    n_pixels: int = 32
    t_len: int = 24
    n_bands: int = len(BANDS)
    d_model: int = 128
    n_heads: int = 4
    lr: float = 1e-3
    epochs: int = 40
    batch: int = 128
    cloud_thresh: float = 0.6
    p_time_drop: float = 0.1
    label_smoothing: float = 0.05
    out_dir: str = "runs/s2crop"
    class_names: list = field(default_factory=list)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--parcels", required=True)
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--monitor", action="store_true")
    p.add_argument("--bf16", action="store_true")
    return p.parse_args()


# ----------------------------------------------------------------------------- data

class ParcelBank:
    def __init__(self, path, cfg):
        z = np.load(path, allow_pickle=True)
        self.pixels = z["pixels"].astype(np.float32)  # (N, T, C, P)
        self.labels = z["labels"].astype(np.int64)
        self.doy = z["doy"].astype(np.float32)
        self.mean = self.pixels.mean(axis=(0, 1, 3), keepdims=True)[0]
        self.std = self.pixels.std(axis=(0, 1, 3), keepdims=True)[0] + 1e-6
        self.cfg = cfg

    def split(self, frac=0.8, seed=0):
        rng = np.random.default_rng(seed)  # CLEAN: host RNG for the train/val split, outside any region
        idx = rng.permutation(len(self.labels))
        k = int(frac * len(idx))
        return idx[:k], idx[k:]

    def class_weights(self):
        counts = np.bincount(self.labels, minlength=self.cfg.n_classes).astype(np.float32)
        w = 1.0 / np.sqrt(counts + 1.0)
        return torch.tensor((w / w.mean()).tolist())  # CLEAN: CPU tensor built from a list at start-up

    def batches(self, idx, batch, shuffle):
        idx = np.array(idx)
        if shuffle:
            np.random.shuffle(idx)  # CLEAN: NumPy RNG shuffling the epoch, outside any region
        for s in range(0, len(idx) - batch + 1, batch):
            j = idx[s:s + batch]
            x = (self.pixels[j] - self.mean) / self.std
            m = np.ones((len(j), self.cfg.t_len, self.cfg.n_pixels), dtype=np.float32)
            yield (torch.from_numpy(x).pin_memory(), torch.from_numpy(m).pin_memory(),
                   torch.from_numpy(self.labels[j]).pin_memory())


# ----------------------------------------------------------------------------- model

class PixelSetEncoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.mlp1 = nn.Sequential(nn.Linear(cfg.n_bands, 64), nn.ReLU(), nn.Linear(64, 64))
        self.mlp2 = nn.Sequential(nn.Linear(128 + 4, cfg.d_model), nn.LayerNorm(cfg.d_model))
        self.cloud_thresh = cfg.cloud_thresh
        self.register_buffer("band_scale", torch.ones(cfg.n_bands))

    def forward(self, x, mask):
        # x: (B, T, C, P)   mask: (B, T, P)
        if (x.abs() > 1e4).any():  # HAZARD: dynamic-control-flow
            x = x.clamp(-1e4, 1e4)
        cloud = x[:, :, -1] > self.cloud_thresh  # HAZARD: python-scalar
        mask = mask * (~cloud).float()
        n_valid = int(mask.sum())  # HAZARD: host-sync
        valid_pixels = x.permute(0, 1, 3, 2)[mask.bool()]  # HAZARD: dynamic-shape
        spread = valid_pixels.std(0).mean() / max(n_valid, 1)
        h = self.mlp1(x.permute(0, 1, 3, 2) * self.band_scale)  # (B, T, P, 64)
        h = h.masked_fill(mask.unsqueeze(-1) == 0, 0.0)  # CLEAN: masked_fill, fixed shape
        denom = mask.sum(-1, keepdim=True).clamp_min(1.0)
        mean = h.sum(2) / denom
        var = ((h - mean.unsqueeze(2)) ** 2 * mask.unsqueeze(-1)).sum(2) / denom
        geo = torch.stack([denom.squeeze(-1) / x.shape[-1], mask.mean(-1), cloud.float().mean(-1),
                           spread.expand(mask.shape[:2])], -1)
        return self.mlp2(torch.cat([mean, var.sqrt(), geo], -1))


class TemporalAttentionEncoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.q = nn.Parameter(torch.randn(cfg.n_heads, cfg.d_model // cfg.n_heads) * 0.02)
        self.k = nn.Linear(cfg.d_model, cfg.d_model)
        self.v = nn.Linear(cfg.d_model, cfg.d_model)
        self.out = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_model), nn.ReLU())
        self.doy_offsets = [0.0, 5.0, 10.0]
        self.p_time_drop = cfg.p_time_drop
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(7)

    def positional(self, doy):
        d = self.cfg.d_model
        freqs = torch.exp(torch.arange(0, d, 2, device=doy.device) * (-np.log(1000.0) / d))
        ang = doy.unsqueeze(-1) * freqs
        return torch.cat([ang.sin(), ang.cos()], -1)

    def forward(self, feats, doy):
        b, t, d = feats.shape
        offs = torch.tensor(self.doy_offsets, device=feats.device)  # HAZARD: host-sync
        doy = doy + offs[1]
        feats = feats + self.positional(doy)
        keep = torch.rand(b, t, 1, device=feats.device, generator=self.gen) > 0.2  # HAZARD: rng
        if self.training and random.random() < self.p_time_drop:  # HAZARD: host-code
            feats = feats * keep
        noise = torch.randn_like(feats) * 0.01  # CLEAN: default CUDA generator, capturable
        feats = feats + noise if self.training else feats
        k = self.k(feats).view(b, t, self.cfg.n_heads, -1)
        v = self.v(feats).view(b, t, self.cfg.n_heads, -1)
        att = torch.einsum("hd,bthd->bht", self.q, k) / np.sqrt(k.shape[-1])
        att = att.softmax(-1)
        z = torch.einsum("bht,bthd->bhd", att, v).reshape(b, d)
        return self.out(z)


class ClassifierHead(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(cfg.d_model, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, cfg.n_classes))
        self.last_t = 0.0

    def forward(self, z, class_prior):
        self.last_t = time.perf_counter()  # HAZARD: host-code
        return self.net(z) + class_prior.log()


# ----------------------------------------------------------------------------- utilities

class ActivationMonitor:
    def __init__(self):
        self.stats = []

    def __call__(self, module, inputs, output):
        self.stats.append(output.detach().float().std().item())


def confusion(pred, target, n):
    cm = torch.zeros(n, n, dtype=torch.long)
    for p, t in zip(pred.tolist(), target.tolist()):  # CLEAN: host loop over eval predictions
        cm[t, p] += 1
    return cm


def report(cm, names, path):
    tp = cm.diag().float()
    prec = tp / cm.sum(0).clamp_min(1)
    rec = tp / cm.sum(1).clamp_min(1)
    f1 = 2 * prec * rec / (prec + rec).clamp_min(1e-9)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["class", "precision", "recall", "f1"])
        for i in range(len(tp)):
            w.writerow([names[i] if i < len(names) else i, f"{prec[i]:.3f}", f"{rec[i]:.3f}", f"{f1[i]:.3f}"])
    return float(f1.mean())


# ----------------------------------------------------------------------------- training

def build(cfg, dev, args, doy0):
    pse = PixelSetEncoder(cfg).to(dev)
    tae = TemporalAttentionEncoder(cfg).to(dev)
    head = ClassifierHead(cfg).to(dev)
    monitor = ActivationMonitor()
    if args.monitor:
        pse.register_forward_hook(monitor)  # HAZARD: api-misuse
    b = cfg.batch
    sx = torch.randn(b, cfg.t_len, cfg.n_bands, cfg.n_pixels, device=dev)
    sm = torch.ones(b, cfg.t_len, cfg.n_pixels, device=dev)
    sf = torch.randn(b, cfg.t_len, cfg.d_model, device=dev, requires_grad=True)
    sd = doy0.to(dev).expand(b, -1).contiguous()
    sz = torch.randn(b, cfg.d_model, device=dev, requires_grad=True)
    sp = torch.full((cfg.n_classes,), 1.0 / cfg.n_classes, device=dev)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.bf16):  # HAZARD: autocast-cache
        pse_g, tae_g, head_g = torch.cuda.make_graphed_callables(
            (pse, tae, head), ((sx, sm), (sf, sd), (sz, sp)))
    return (pse, tae, head), (pse_g, tae_g, head_g), monitor


def attach_late(pse, monitor):
    return pse.register_forward_hook(monitor)  # CLEAN: hook added after graphing, only fires on eager eval forwards


def train(args):
    cfg = CropConfig(epochs=args.epochs, batch=args.batch)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    dev = torch.device("cuda")
    bank = ParcelBank(args.parcels, cfg)
    tr_idx, va_idx = bank.split(seed=args.seed)
    doy0 = torch.from_numpy(bank.doy[0]).unsqueeze(0)
    (pse, tae, head), (pse_g, tae_g, head_g), monitor = build(cfg, dev, args, doy0)
    params = [p for m in (pse, tae, head) for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=1e-2)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=cfg.epochs)
    weights = bank.class_weights().to(dev)
    prior = torch.full((cfg.n_classes,), 1.0 / cfg.n_classes, device=dev)
    doy = doy0.to(dev).expand(cfg.batch, -1).contiguous()
    os.makedirs(cfg.out_dir, exist_ok=True)
    best_f1 = 0.0
    for epoch in range(cfg.epochs):
        pse.cloud_thresh = max(0.3, cfg.cloud_thresh - 0.01 * epoch)
        for m in (pse, tae, head):
            m.train()
        t0 = time.time()  # CLEAN: wall clock around the epoch, outside any region
        tot, n = 0.0, 0
        for x, m, y in bank.batches(tr_idx, cfg.batch, shuffle=True):
            x = x.to(dev, non_blocking=True)
            m = m.to(dev, non_blocking=True)
            y = y.to(dev, non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.bf16, cache_enabled=False):  # CLEAN: cache-free autocast around replays
                f = pse_g(x, m)
                z = tae_g(f, doy)
                logits = head_g(z, class_prior=prior)  # HAZARD: api-misuse
            loss = F.cross_entropy(logits.float(), y, weight=weights, label_smoothing=cfg.label_smoothing)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            tot += loss.item() * len(y)  # CLEAN: loss read after the graphed backward, outside any capture
            n += len(y)
        sched.step()  # CLEAN: eager optimizer and scheduler; only forward/backward are graphed
        f1 = evaluate(cfg, bank, va_idx, (pse, tae, head), doy, prior, dev, epoch, monitor)
        log.info("epoch %d loss %.4f val-mF1 %.3f lr %.2e %.1fs", epoch, tot / max(n, 1), f1,
                 sched.get_last_lr()[0], time.time() - t0)
        if f1 > best_f1:
            best_f1 = f1
            torch.save({m.__class__.__name__: m.state_dict() for m in (pse, tae, head)},
                       os.path.join(cfg.out_dir, "best.pt"))
    print(f"best validation mean F1: {best_f1:.3f}")


@torch.no_grad()
def evaluate(cfg, bank, idx, mods, doy, prior, dev, epoch, monitor):
    pse, tae, head = mods
    for mod in mods:
        mod.eval()
    handle = attach_late(pse, monitor) if epoch % 10 == 0 else None
    preds, gts = [], []
    for x, m, y in bank.batches(idx, cfg.batch, shuffle=False):
        x, m = x.to(dev), m.to(dev)
        logits = head(tae(pse(x, m), doy), prior)
        preds.append(logits.argmax(-1).cpu())  # CLEAN: eager evaluation, modules in eval mode are not replayed
        gts.append(y)
    if handle is not None:
        handle.remove()
    pred = torch.cat(preds)
    gt = torch.cat(gts)
    acc = (pred == gt).float().mean().item()  # CLEAN: host read in evaluation
    cm = confusion(pred, gt, cfg.n_classes)
    f1 = report(cm, cfg.class_names, os.path.join(cfg.out_dir, f"val_{epoch:03d}.csv"))
    print(f"  val acc {acc:.3f}  mF1 {f1:.3f}  worst class {int(cm.diag().argmin())}")
    return f1


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    train(parse_args())
