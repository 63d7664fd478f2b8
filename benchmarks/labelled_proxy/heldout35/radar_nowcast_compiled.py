"""Radar precipitation nowcasting (ConvGRU encoder-forecaster).

Training uses torch.compile(mode="reduce-overhead") for the model, the loss and the
optimizer step; the operational forecaster is a separate reduce-overhead build.

    python radar_nowcast_compiled.py --data /data/radar/*.npz --epochs 30
    python radar_nowcast_compiled.py --forecast --ckpt nowcast.pt --scans 120
"""
import argparse
import glob
import logging
import math
import os
import random
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("nowcast")

LOSS_CFG = {"heavy_w": 0.1, "dbz_edges": (5.0, 20.0, 30.0, 40.0)}


@dataclass
class NowcastConfig:
    height: int = 128
    width: int = 128
    t_in: int = 6
    t_out: int = 12
    hidden: int = 64
    lr: float = 2e-4
    weight_decay: float = 1e-2
    warmup_steps: int = 500
    epochs: int = 30
    batch_size: int = 8
    clim_mean: float = 8.0
    clim_std: float = 12.0
    ckpt: str = "nowcast.pt"


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="/data/radar/*.npz")
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--forecast", action="store_true")
    p.add_argument("--ckpt", default="nowcast.pt")
    p.add_argument("--scans", type=int, default=120)
    p.add_argument("--seed", type=int, default=17)
    return p.parse_args()


# ----------------------------------------------------------------------------- data

class RadarSequences:
    """Yields (frames, target) with a variable number of input scans (gaps in the archive)."""

    def __init__(self, pattern, cfg, shuffle=True):
        self.files = sorted(glob.glob(pattern))
        self.cfg = cfg
        self.shuffle = shuffle

    def __iter__(self):
        files = list(self.files)
        if self.shuffle:
            random.shuffle(files)  # CLEAN: host RNG over file order, outside any region
        batch = []
        for path in files:
            arr = np.load(path)["dbz"].astype(np.float32)
            gap = np.random.randint(0, 3)  # CLEAN: NumPy RNG picking a missing-scan gap in the loader
            t_in = self.cfg.t_in - gap
            x = arr[gap:self.cfg.t_in]
            y = arr[self.cfg.t_in:self.cfg.t_in + self.cfg.t_out]
            batch.append((x, y, t_in))
            if len(batch) == self.cfg.batch_size:
                yield self.collate(batch)
                batch = []

    @staticmethod
    def collate(batch):
        t_min = min(b[2] for b in batch)
        x = np.stack([b[0][-t_min:] for b in batch])
        y = np.stack([b[1] for b in batch])
        return torch.from_numpy(x).unsqueeze(2), torch.from_numpy(y).unsqueeze(2)


# ----------------------------------------------------------------------------- model

class ConvGRUCell(nn.Module):
    def __init__(self, cin, hidden, k=3):
        super().__init__()
        self.gates = nn.Conv2d(cin + hidden, 2 * hidden, k, padding=k // 2)
        self.cand = nn.Conv2d(cin + hidden, hidden, k, padding=k // 2)

    def forward(self, x, h):
        z, r = torch.sigmoid(self.gates(torch.cat([x, h], 1))).chunk(2, 1)
        c = torch.tanh(self.cand(torch.cat([x, r * h], 1)))
        return (1 - z) * h + z * c


class Encoder(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 32, 3, stride=2, padding=1), nn.GELU(),
            nn.Conv2d(32, hidden, 3, stride=2, padding=1), nn.GELU(),
        )

    def forward(self, x):
        return self.net(x)


class Decoder(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.net = nn.Sequential(
            nn.ConvTranspose2d(hidden, 32, 4, stride=2, padding=1), nn.GELU(),
            nn.ConvTranspose2d(32, 1, 4, stride=2, padding=1),
        )

    def forward(self, h):
        return self.net(h)


class Nowcaster(nn.Module):
    def __init__(self, cfg: NowcastConfig):
        super().__init__()
        self.cfg = cfg
        self.enc = Encoder(cfg.hidden)
        self.cell = ConvGRUCell(cfg.hidden, cfg.hidden)
        self.dec = Decoder(cfg.hidden)
        self.register_buffer("clim_mean", torch.tensor(cfg.clim_mean))
        self.register_buffer("clim_std", torch.tensor(cfg.clim_std))
        self.teacher_forcing = 1.0
        self.t_out = cfg.t_out

    def normalize_(self, frames):
        frames.sub_(self.clim_mean).div_(self.clim_std)  # HAZARD: static-address
        return frames

    def forward(self, frames, target=None):
        frames = self.normalize_(frames)
        b, t, _, hgt, wid = frames.shape
        h = frames.new_zeros(b, self.cfg.hidden, hgt // 4, wid // 4)
        for i in range(t):
            h = self.cell(self.enc(frames[:, i]), h)
        prev = frames[:, -1]
        outs = []
        for i in range(self.t_out):
            h = self.cell(self.enc(prev), h)
            y = self.dec(h)
            outs.append(y)  # CLEAN: Python list of lead times inside forward, same length every call
            if target is not None and self.training:
                tf = self.teacher_forcing  # HAZARD: python-scalar
                prev = tf * (target[:, i] - self.clim_mean) / self.clim_std + (1.0 - tf) * y
            else:
                prev = y
        out = torch.stack(outs, 1) * self.clim_std + self.clim_mean
        if torch.isnan(out).any():  # HAZARD: dynamic-control-flow
            out = torch.nan_to_num(out)
        return out.clamp(min=0.0)


def rain_loss(pred, target):
    edges = torch.tensor(LOSS_CFG["dbz_edges"], device=target.device)
    w = 1.0 + torch.bucketize(target, edges).float()  # CLEAN: bucketize with device boundaries, no host read
    base = (w * (pred - target) ** 2).mean()
    scale = target.amax().item()  # HAZARD: host-sync
    heavy = target > 30.0
    heavy_err = (pred - target)[heavy].abs().mean()  # HAZARD: dynamic-shape
    log.debug("heavy-rain error %s", heavy_err)  # HAZARD: host-code
    hw = LOSS_CFG["heavy_w"]  # HAZARD: python-scalar
    return base / max(scale, 1.0) + hw * heavy_err


# ----------------------------------------------------------------------------- metrics (eager)

@torch.no_grad()
def csi(pred, target, thr):
    p = pred >= thr
    o = target >= thr
    hits = (p & o).sum().item()  # CLEAN: metric read in eager evaluation
    misses = (~p & o).sum().item()
    fa = (p & ~o).sum().item()
    return hits / max(hits + misses + fa, 1)


@torch.no_grad()
def evaluate(model_eval, loader, dev, max_batches=50):
    scores = {20: [], 30: [], 40: []}
    mse = []
    for i, (x, y) in enumerate(loader):
        if i >= max_batches:
            break
        x, y = x.to(dev), y.to(dev)
        pred = model_eval(x)  # CLEAN: max-autotune-no-cudagraphs build, ragged scans only recompile
        mse.append(F.mse_loss(pred, y).item())
        for thr in scores:
            scores[thr].append(csi(pred, y, thr))
        wet = (y > 0.5).nonzero()  # CLEAN: nonzero in eager evaluation
        if i == 0:
            print(f"first eval batch: {wet.shape[0]} wet pixels, max dBZ {y.max().item():.1f}")  # CLEAN: print outside any compiled function
    return {"mse": float(np.mean(mse)), **{f"csi{k}": float(np.mean(v)) for k, v in scores.items()}}


def warmup_lr(step, cfg):
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    return cfg.lr


def save(model, opt, cfg, epoch, path):
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": epoch, "cfg": vars(cfg)}, tmp)
    os.replace(tmp, path)
    log.info("saved %s (epoch %d)", path, epoch)


# ----------------------------------------------------------------------------- training

def train(args):
    cfg = NowcastConfig(epochs=args.epochs, batch_size=args.batch_size)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    dev = torch.device("cuda")
    model = Nowcaster(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    model_c = torch.compile(model, mode="reduce-overhead")
    loss_c = torch.compile(rain_loss, mode="reduce-overhead")

    @torch.compile(mode="reduce-overhead")
    def opt_step():
        opt.step()

    model_eval = torch.compile(model, mode="max-autotune-no-cudagraphs")
    train_data = RadarSequences(args.data, cfg, shuffle=True)
    val_data = RadarSequences(args.data, cfg, shuffle=False)
    step = 0
    for epoch in range(cfg.epochs):
        model.train()
        model.teacher_forcing = max(0.0, 1.0 - epoch / 10.0)
        LOSS_CFG["heavy_w"] = 0.1 + 0.02 * epoch
        t0 = time.time()  # CLEAN: epoch timer outside the compiled functions
        losses = []
        for x, y in train_data:
            x = x.to(dev, non_blocking=True)
            y = y.to(dev, non_blocking=True)
            pred = model_c(x, y)  # HAZARD: dynamic-shape
            loss = loss_c(pred, y)
            losses.append(loss.item())  # CLEAN: loss read before backward and the compiled step, outside the compiled functions
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt_step()
            for g in opt.param_groups:
                g["lr"] = warmup_lr(step, cfg)  # HAZARD: optimizer
            step += 1
            if not math.isfinite(losses[-1]):
                raise RuntimeError(f"loss diverged at step {step}")
        if epoch == 20:
            opt.param_groups[0]["weight_decay"] = cfg.weight_decay * 0.1  # HAZARD: optimizer
        model.eval()
        metrics = evaluate(model_eval, val_data, dev)
        print(f"epoch {epoch:3d} loss {np.mean(losses):.4f} val {metrics} tf {model.teacher_forcing:.2f} "
              f"({time.time() - t0:.0f}s)")
        save(model, opt, cfg, epoch, args.ckpt)


# ----------------------------------------------------------------------------- operational forecast

class Forecaster:
    def __init__(self, ckpt, dev):
        blob = torch.load(ckpt, map_location="cpu")
        self.cfg = NowcastConfig(**blob["cfg"])
        self.model = Nowcaster(self.cfg).to(dev).eval()
        self.model.load_state_dict(blob["model"])
        self.run = torch.compile(self._run, mode="reduce-overhead")
        self.dev = dev
        self.archive = []
        self.latest = None

    def _run(self, frames):
        return self.model(frames.clone())  # CLEAN: normalises a private copy, the graph input is not mutated

    @torch.no_grad()
    def step(self, scans_cpu):
        x = scans_cpu.to(self.dev, non_blocking=True)  # CLEAN: upload before the compiled call
        out = self.run(x)
        self.latest = out.clone()  # CLEAN: cloned before the next call
        self.archive.append(out)  # HAZARD: static-address
        return self.latest


def fake_scans(cfg, n):
    for _ in range(n):
        yield torch.rand(1, cfg.t_in, 1, cfg.height, cfg.width).mul_(50.0).pin_memory()  # CLEAN: host RNG fake feed, outside any region


def forecast(args):
    dev = torch.device("cuda")
    fc = Forecaster(args.ckpt, dev)
    t_start = time.perf_counter()
    for i, scans in enumerate(fake_scans(fc.cfg, args.scans)):
        lead = fc.step(scans)
        peak = lead.amax().item()  # CLEAN: host read of the cloned forecast, outside the compiled function
        if i % 10 == 0:
            log.info("scan %d: peak %.1f dBZ at +60 min", i, peak)
    dt = time.perf_counter() - t_start
    print(f"{args.scans} forecasts in {dt:.1f}s ({1e3 * dt / args.scans:.1f} ms each)")


def main():
    logging.basicConfig(level=logging.INFO)
    args = parse_args()
    if args.forecast:
        forecast(args)
    else:
        train(args)


if __name__ == "__main__":
    main()
