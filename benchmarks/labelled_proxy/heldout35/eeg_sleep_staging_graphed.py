"""Automatic sleep staging from PSG (2 EEG + 1 EOG channels, 30 s epochs, 5 stages).

train: the whole SleepNet is graphed with torch.cuda.make_graphed_callables.
score: an overnight recording is scored with manually captured CUDA graphs.

    python eeg_sleep_staging_graphed.py train --npz data/sleep-edf/*.npz --epochs 30
    python eeg_sleep_staging_graphed.py score --ckpt sleep.pt --night SC4001.npz
"""
import argparse
import glob
import json
import logging
import os
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from scipy.signal import firwin

log = logging.getLogger("sleep")

STAGES = ["W", "N1", "N2", "N3", "REM"]


@dataclass
class SleepConfig:
    fs: int = 100
    epoch_len: int = 3000
    channels: int = 3
    montage: list = field(default_factory=lambda: [0, 1, 2])
    width: int = 64
    batch: int = 128
    epochs: int = 30
    lr: float = 1e-3
    artifact_uv: float = 500.0
    mix_alpha: float = 0.0
    score_batch: int = 64
    out: str = "runs/sleep"


def parse_args():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--npz", default="data/sleep-edf/*.npz")
    t.add_argument("--epochs", type=int, default=30)
    t.add_argument("--fp16", action="store_true")
    s = sub.add_parser("score")
    s.add_argument("--ckpt", default="runs/sleep/sleep.pt")
    s.add_argument("--night", required=True)
    s.add_argument("--fp16", action="store_true")
    return p.parse_args()


# ----------------------------------------------------------------------------- data (host)

def load_nights(pattern):
    nights = []
    for path in sorted(glob.glob(pattern)):
        z = np.load(path)
        x = z["x"].astype(np.float32)  # (n_epochs, C, 3000) in microvolts
        y = z["y"].astype(np.int64)
        nights.append((os.path.basename(path), x, y))
    return nights


def balanced_batches(nights, batch, rng):
    xs = np.concatenate([n[1] for n in nights])
    ys = np.concatenate([n[2] for n in nights])
    per_class = [np.nonzero(ys == c)[0] for c in range(len(STAGES))]  # CLEAN: NumPy nonzero in the sampler
    n_batches = len(ys) // batch
    for _ in range(n_batches):
        cls = rng.integers(0, len(STAGES), size=batch)  # CLEAN: host RNG in the sampler
        idx = np.array([rng.choice(per_class[c]) for c in cls])
        yield torch.from_numpy(xs[idx]).pin_memory(), torch.from_numpy(ys[idx]).pin_memory()


# ----------------------------------------------------------------------------- model

class Preproc(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.fir = firwin(101, [0.3, 35.0], pass_zero=False, fs=cfg.fs).astype(np.float32)
        self.montage = cfg.montage
        self.artifact_uv = cfg.artifact_uv

    def forward(self, x):
        x = x[:, self.montage]  # HAZARD: host-sync
        taps = torch.from_numpy(self.fir).to(x.device)  # HAZARD: pinned-memory
        x = F.conv1d(x.reshape(-1, 1, x.shape[-1]), taps.view(1, 1, -1), padding=50).view_as(x)
        if x.std() < 1e-6:  # HAZARD: dynamic-control-flow
            x = x + 1e-6
        bad = (x.abs() > self.artifact_uv).float().mean().item()  # HAZARD: host-sync
        x = x.clamp(-self.artifact_uv, self.artifact_uv) * (1.0 - min(bad, 0.5))
        return x / 100.0


class SleepNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        w = cfg.width
        self.pre = Preproc(cfg)
        self.small = nn.Sequential(nn.Conv1d(cfg.channels, w, 50, stride=6), nn.BatchNorm1d(w), nn.ReLU(),
                                   nn.MaxPool1d(8), nn.Conv1d(w, 2 * w, 8, padding=4), nn.ReLU(), nn.MaxPool1d(4))
        self.large = nn.Sequential(nn.Conv1d(cfg.channels, w, 400, stride=50), nn.BatchNorm1d(w), nn.ReLU(),
                                   nn.MaxPool1d(4), nn.Conv1d(w, 2 * w, 6, padding=3), nn.ReLU(), nn.MaxPool1d(2))
        self.attn = nn.Linear(4 * w, 1)
        self.cls = nn.Sequential(nn.Dropout(0.5), nn.Linear(4 * w, len(STAGES)))
        self.mix_alpha = cfg.mix_alpha

    def forward(self, x):
        x = self.pre(x)
        if self.training:
            shift = np.random.randint(-50, 50)  # HAZARD: host-code
            x = torch.roll(x, shift, -1)
            lam = self.mix_alpha  # HAZARD: python-scalar
            x = (1 - lam) * x + lam * x.flip(0)
        a = self.small(x)
        b = self.large(x)
        n = min(a.shape[-1], b.shape[-1])  # CLEAN: shape arithmetic, fixed at capture
        h = torch.cat([a[..., :n], b[..., :n]], 1).transpose(1, 2)
        w = self.attn(h).softmax(1)
        return self.cls((w * h).sum(1))


# ----------------------------------------------------------------------------- metrics (host)

def cohen_kappa(pred, true, k=len(STAGES)):
    cm = np.zeros((k, k), dtype=np.int64)
    for p, t in zip(pred, true):
        cm[t, p] += 1
    po = np.trace(cm) / max(cm.sum(), 1)
    pe = (cm.sum(0) * cm.sum(1)).sum() / max(cm.sum() ** 2, 1)
    return (po - pe) / max(1 - pe, 1e-9), cm


@torch.no_grad()
def validate(model, nights, dev):
    model.eval()
    preds, trues = [], []
    for _, x, y in nights:
        logits = model(torch.from_numpy(x).to(dev))  # CLEAN: eval mode runs the original forward, not a replay
        preds += logits.argmax(-1).tolist()  # CLEAN: host read in validation
        trues += y.tolist()
    model.train()
    kappa, cm = cohen_kappa(preds, trues)
    acc = float(np.trace(cm) / max(cm.sum(), 1))
    return acc, kappa, cm


# ----------------------------------------------------------------------------- training (graphed)

def train(args):
    cfg = SleepConfig(epochs=args.epochs)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    nights = load_nights(args.npz)
    val = nights[::10]
    tr = [n for i, n in enumerate(nights) if i % 10]
    model = SleepNet(cfg).to(dev).train()
    sample = torch.randn(cfg.batch, cfg.channels, cfg.epoch_len, device=dev) * 50
    graphed = torch.cuda.make_graphed_callables(model, (sample,))
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.3)
    weights = torch.tensor([1.0, 1.5, 1.0, 1.0, 1.2], device=dev)  # CLEAN: built once at start-up, outside any region
    os.makedirs(cfg.out, exist_ok=True)
    best = -1.0
    for epoch in range(cfg.epochs):
        model.mix_alpha = min(0.2, 0.02 * epoch)
        t0 = time.time()  # CLEAN: wall clock in the driver loop
        tot = 0.0
        nb = 0
        for x, y in balanced_batches(tr, cfg.batch, rng):
            x = x.to(dev, non_blocking=True)
            y = y.to(dev, non_blocking=True)
            with torch.autocast("cuda", dtype=torch.float16, enabled=args.fp16, cache_enabled=False):  # CLEAN: cache-free autocast around the replay
                logits = graphed(x)
            loss = F.cross_entropy(logits.float(), y, weight=weights)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot += loss.item()  # CLEAN: loss read after the graphed backward
            nb += 1
        sched.step()  # CLEAN: eager optimizer, its step is not captured
        acc, kappa, cm = validate(model, val, dev)
        log.info("epoch %d loss %.4f val acc %.3f kappa %.3f (%.0fs)", epoch, tot / max(nb, 1), acc, kappa, time.time() - t0)
        if kappa > best:
            best = kappa
            torch.save({"model": model.state_dict(), "cfg": cfg.__dict__}, os.path.join(cfg.out, "sleep.pt"))
            np.savetxt(os.path.join(cfg.out, "confusion.txt"), cm, fmt="%d")


# ----------------------------------------------------------------------------- overnight scoring (manual capture)

class HypnogramSmoother(nn.Module):
    """Fixed transition-matrix forward filtering over a window of epoch posteriors."""

    def __init__(self):
        super().__init__()
        t = torch.full((5, 5), 0.02) + torch.eye(5) * 0.9
        self.register_buffer("log_trans", (t / t.sum(1, keepdim=True)).log())

    def forward(self, logp):
        alpha = logp[0]
        outs = [alpha]
        for t in range(1, logp.shape[0]):
            alpha = torch.logsumexp(alpha[:, None] + self.log_trans, 0) + logp[t]
            outs.append(alpha)  # CLEAN: Python list over a fixed window length
        return torch.stack(outs).log_softmax(-1)


class NightScorer:
    def __init__(self, ckpt, dev, fp16):
        blob = torch.load(ckpt, map_location="cpu")
        self.cfg = SleepConfig(**blob["cfg"])
        self.model = SleepNet(self.cfg).to(dev).eval()
        self.model.load_state_dict(blob["model"])
        self.smoother = HypnogramSmoother().to(dev)
        self.dev = dev
        self.fp16 = fp16
        self.epochs_scored = 0
        b = self.cfg.score_batch
        self.sx = torch.zeros(b, self.cfg.channels, self.cfg.epoch_len, device=dev)
        self.slogp = torch.zeros(b, len(STAGES), device=dev)
        self.g_cls = torch.cuda.CUDAGraph()
        self.g_smooth = torch.cuda.CUDAGraph()

    def _classify(self, x):
        out = self.model(x).log_softmax(-1)
        self.epochs_scored += x.shape[0]  # HAZARD: host-code
        return out

    @torch.no_grad()
    def capture(self):
        with torch.autocast("cuda", dtype=torch.float16, enabled=self.fp16):  # HAZARD: autocast-cache
            with torch.cuda.graph(self.g_cls):  # HAZARD: api-misuse
                self.out_cls = self._classify(self.sx)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.smoother(self.slogp)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.g_smooth, stream=torch.cuda.current_stream()):  # HAZARD: stream
            self.out_smooth = self.smoother(self.slogp)

    @torch.no_grad()
    def score(self, night_x):
        b = self.cfg.score_batch
        raw, smooth = [], []
        for s in range(0, len(night_x), b):
            chunk = torch.from_numpy(night_x[s:s + b]).pin_memory()
            n = chunk.shape[0]
            self.sx[:n].copy_(chunk, non_blocking=True)  # CLEAN: pinned copy_ into the static input
            self.sx[n:].zero_()
            self.g_cls.replay()
            self.slogp.copy_(self.out_cls)  # CLEAN: device-to-device copy into the smoother's static input
            self.g_smooth.replay()
            raw.append(self.out_cls[:n])  # HAZARD: static-address
            smooth.append(self.out_smooth[:n].clone())  # CLEAN: cloned before the next replay
        return torch.cat(raw), torch.cat(smooth)


def score(args):
    dev = torch.device("cuda")
    scorer = NightScorer(args.ckpt, dev, args.fp16)
    scorer.capture()
    z = np.load(args.night)
    t0 = time.perf_counter()
    raw, smooth = scorer.score(z["x"].astype(np.float32))
    torch.cuda.synchronize()  # CLEAN: sync for timing, outside any capture
    hyp = smooth.argmax(-1).cpu().numpy()
    minutes = {s: float((hyp == i).sum() * 0.5) for i, s in enumerate(STAGES)}
    tst = sum(v for k, v in minutes.items() if k != "W")
    result = {"night": os.path.basename(args.night), "minutes": minutes, "total_sleep_min": tst,
              "efficiency": tst / max(len(hyp) * 0.5, 1e-9), "epochs_scored": scorer.epochs_scored,
              "seconds": time.perf_counter() - t0}
    if "y" in z:
        kappa, _ = cohen_kappa(hyp.tolist(), z["y"].tolist())
        result["kappa"] = kappa
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    a = parse_args()
    train(a) if a.cmd == "train" else score(a)
