"""Li-ion cell state-of-health (SOH) and remaining-useful-life (RUL) estimation.

Per-cycle discharge curves -> dilated TCN over cycles -> attention pooling -> SOH / RUL.
The model and the training objective are compiled with options={"triton.cudagraphs": True}.

    python battery_soh_compiled.py fit --cells data/cells/*.csv --epochs 60
    python battery_soh_compiled.py monitor --ckpt soh.pt --fleet fleet.parquet
"""
import argparse
import glob
import json
import logging
import os
import time
from dataclasses import dataclass, asdict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("soh")

CG = {"triton.cudagraphs": True}


@dataclass
class SohConfig:
    curve_points: int = 128
    window: int = 64
    channels: int = 64
    levels: int = 5
    lr: float = 1e-3
    head_lr: float = 3e-3
    epochs: int = 60
    batch: int = 256
    rul_weight: float = 0.1
    eol_soh: float = 0.8
    temp_ref_c: float = 25.0


def parse_args():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fit")
    f.add_argument("--cells", default="data/cells/*.csv")
    f.add_argument("--epochs", type=int, default=60)
    f.add_argument("--ckpt", default="soh.pt")
    m = sub.add_parser("monitor")
    m.add_argument("--ckpt", default="soh.pt")
    m.add_argument("--fleet", default="fleet.npz")
    m.add_argument("--report", default="fleet_report.json")
    return p.parse_args()


# ----------------------------------------------------------------------------- preprocessing (host)

def resample_curve(voltage, capacity, n):
    grid = np.linspace(voltage.min(), voltage.max(), n)
    order = np.argsort(voltage)
    return np.interp(grid, voltage[order], capacity[order]).astype(np.float32)


def load_cell(path, cfg):
    raw = np.genfromtxt(path, delimiter=",", names=True)
    cycles = np.unique(raw["cycle"]).astype(int)
    curves, soh = [], []
    nominal = None
    for c in cycles:
        rows = raw[raw["cycle"] == c]
        cap = rows["capacity"]
        if nominal is None:
            nominal = cap.max()
        curves.append(resample_curve(rows["voltage"], cap / nominal, cfg.curve_points))
        soh.append(cap.max() / nominal)
    soh = np.array(soh, dtype=np.float32)
    below = np.nonzero(soh < cfg.eol_soh)[0]  # CLEAN: NumPy nonzero in preprocessing
    eol = below[0] if len(below) else len(soh)
    rul = np.maximum(eol - np.arange(len(soh)), 0).astype(np.float32)
    temp = float(np.median(raw["temperature"]))
    return np.stack(curves), soh, rul, temp


def windows(curves, soh, rul, cfg):
    xs, ys, rs, idx = [], [], [], []
    for end in range(cfg.window, len(soh)):
        xs.append(curves[end - cfg.window:end])
        ys.append(soh[end - 1])
        rs.append(rul[end - 1])
        idx.append(np.arange(end - cfg.window, end))
    return np.stack(xs), np.array(ys), np.array(rs), np.stack(idx)


# ----------------------------------------------------------------------------- model

class TemporalBlock(nn.Module):
    def __init__(self, c, dilation):
        super().__init__()
        self.conv1 = nn.Conv1d(c, c, 3, padding=dilation, dilation=dilation)
        self.conv2 = nn.Conv1d(c, c, 3, padding=dilation, dilation=dilation)
        self.norm = nn.GroupNorm(8, c)

    def forward(self, x):
        return x + self.conv2(F.gelu(self.norm(self.conv1(x))))


class SohNet(nn.Module):
    def __init__(self, cfg: SohConfig):
        super().__init__()
        self.curve_enc = nn.Sequential(nn.Linear(cfg.curve_points, 128), nn.GELU(), nn.Linear(128, cfg.channels))
        self.tcn = nn.Sequential(*[TemporalBlock(cfg.channels, 2 ** i) for i in range(cfg.levels)])
        self.attn = nn.Linear(cfg.channels, 1)
        self.soh_head = nn.Linear(cfg.channels, 1)
        self.rul_head = nn.Linear(cfg.channels, 1)
        self.temp_coeff = 1.0
        self.last_call = 0.0

    def forward(self, curves, cycle_idx):
        # curves: (B, W, P)   cycle_idx: (B, W) absolute cycle numbers
        x = self.curve_enc(curves) * self.temp_coeff  # HAZARD: python-scalar
        log.info("batch mean discharge capacity %s", curves[..., -1].mean())  # HAZARD: host-code
        ages = cycle_idx[:, -1].tolist()  # HAZARD: host-sync
        age = torch.as_tensor(ages, device=curves.device, dtype=torch.float32) / 1000.0
        h = self.tcn(x.transpose(1, 2)).transpose(1, 2)
        moving = torch.nonzero(curves.std(-1).mean(-1) > 1e-3)  # HAZARD: dynamic-shape
        w = self.attn(h).softmax(1)
        pooled = (w * h).sum(1)
        soh = torch.sigmoid(self.soh_head(pooled)).squeeze(-1) * 1.2
        rul = F.softplus(self.rul_head(pooled)).squeeze(-1) * 100.0 * (1.0 + age)
        if soh.std() < 1e-4:  # HAZARD: dynamic-control-flow
            soh = soh + 1e-4 * torch.randn_like(soh)
        self.last_call = time.time()  # HAZARD: host-code
        return soh, rul, moving.shape[0]


@torch.compile(options=CG, dynamic=False)
def objective(soh_pred, rul_pred, soh, rul, cfg: SohConfig):
    soh.clamp_(0.0, 1.2)  # HAZARD: static-address
    w = cfg.rul_weight  # HAZARD: python-scalar
    l_soh = F.smooth_l1_loss(soh_pred, soh, beta=0.01)
    l_rul = F.smooth_l1_loss(torch.log1p(rul_pred), torch.log1p(rul))
    return l_soh + w * l_rul


@torch.compile(mode="max-autotune-no-cudagraphs", dynamic=True)
def report_forward(model, curves, cycle_idx):
    soh, rul, _ = model(curves, cycle_idx)
    return soh, rul


# ----------------------------------------------------------------------------- training

class CellDataset:
    def __init__(self, pattern, cfg):
        self.items = []
        for path in sorted(glob.glob(pattern)):
            curves, soh, rul, temp = load_cell(path, cfg)
            if len(soh) <= cfg.window:
                log.warning("skipping %s: only %d cycles", path, len(soh))
                continue
            x, y, r, idx = windows(curves, soh, rul, cfg)
            self.items.append((os.path.basename(path), x, y, r, idx, temp))
        log.info("loaded %d cells", len(self.items))

    def split(self, k=5):
        val = [it for i, it in enumerate(self.items) if i % k == 0]
        tr = [it for i, it in enumerate(self.items) if i % k != 0]
        return tr, val

    @staticmethod
    def batches(items, batch, dev, shuffle=True):
        for name, x, y, r, idx, temp in items:
            order = np.random.permutation(len(y)) if shuffle else np.arange(len(y))  # CLEAN: host RNG in the loader
            for s in range(0, len(order) - batch + 1, batch):
                j = order[s:s + batch]
                yield (name, temp, torch.from_numpy(x[j]).to(dev), torch.from_numpy(idx[j]).to(dev),
                       torch.from_numpy(y[j]).to(dev), torch.from_numpy(r[j]).to(dev))


def fit(args):
    cfg = SohConfig(epochs=args.epochs)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    np.random.seed(0)
    data = CellDataset(args.cells, cfg)
    tr, val = data.split()
    model = SohNet(cfg).to(dev)
    model_c = torch.compile(model, options=CG, dynamic=False)
    body = [p for n, p in model.named_parameters() if not n.startswith(("soh_head", "rul_head"))]
    heads = list(model.soh_head.parameters()) + list(model.rul_head.parameters())
    opt = torch.optim.AdamW(body, lr=cfg.lr, weight_decay=1e-4)
    opt_heads = torch.optim.Adam(heads, lr=torch.tensor(cfg.head_lr), capturable=True)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=4)

    @torch.compile(options=CG)
    def step_all():
        opt.step()
        opt_heads.step()

    best = float("inf")
    for epoch in range(cfg.epochs):
        model.train()
        cfg.rul_weight = min(1.0, 0.1 + 0.03 * epoch)
        t0 = time.time()  # CLEAN: epoch timer outside the compiled functions
        losses = []
        for name, temp, x, idx, y, r in CellDataset.batches(tr, cfg.batch, dev):
            model.temp_coeff = 1.0 + 0.01 * (temp - cfg.temp_ref_c)
            soh_p, rul_p, _ = model_c(x, idx)
            loss = objective(soh_p, rul_p, y, r, cfg)
            losses.append(loss.detach().clone())  # CLEAN: loss cloned before backward and the compiled step
            opt.zero_grad(set_to_none=True)
            opt_heads.zero_grad(set_to_none=True)
            loss.backward()
            step_all()
        for g in opt_heads.param_groups:
            g["lr"].fill_(cfg.head_lr * 0.97 ** epoch)  # CLEAN: tensor LR updated in place, no recompile
        val_mse = validate(model, val, cfg, dev)
        plateau.step(val_mse)  # HAZARD: optimizer
        tr_loss = torch.stack(losses).mean().item()  # CLEAN: host read of cloned losses, outside the compiled functions
        print(f"epoch {epoch:3d} loss {tr_loss:.5f} val soh-rmse {val_mse ** 0.5:.4f} "
              f"lr {opt.param_groups[0]['lr']:.1e} ({time.time() - t0:.1f}s)")
        if val_mse < best:
            best = val_mse
            torch.save({"model": model.state_dict(), "cfg": asdict(cfg), "epoch": epoch}, args.ckpt)


@torch.no_grad()
def validate(model, items, cfg, dev):
    model.eval()
    se, n = 0.0, 0
    for _, temp, x, idx, y, r in CellDataset.batches(items, cfg.batch, dev, shuffle=False):
        model.temp_coeff = 1.0 + 0.01 * (temp - cfg.temp_ref_c)
        soh, _ = report_forward(model, x, idx)  # CLEAN: no-cudagraphs compile for validation
        se += ((soh - y) ** 2).sum().item()  # CLEAN: host read in validation
        n += len(y)
    return se / max(n, 1)


# ----------------------------------------------------------------------------- fleet monitoring

class FleetMonitor:
    def __init__(self, ckpt, dev):
        blob = torch.load(ckpt, map_location="cpu")
        self.cfg = SohConfig(**blob["cfg"])
        self.model = SohNet(self.cfg).to(dev).eval()
        self.model.load_state_dict(blob["model"])
        self.run = torch.compile(self.model, options=CG)
        self.dev = dev
        self.history = {}

    @torch.no_grad()
    def assess(self, pack_id, curves, cycles):
        x = torch.from_numpy(curves).to(self.dev)  # CLEAN: upload before the compiled call
        idx = torch.from_numpy(cycles).to(self.dev)
        soh, rul, _ = self.run(x[None], idx[None])  # HAZARD: dynamic-shape
        self.history.setdefault(pack_id, []).append(soh)  # HAZARD: static-address
        return soh.clone(), rul.clone()  # CLEAN: returned copies survive the next call


def monitor(args):
    dev = torch.device("cuda")
    mon = FleetMonitor(args.ckpt, dev)
    fleet = np.load(args.fleet, allow_pickle=True)
    report = {}
    t0 = time.perf_counter()
    for pack_id, curves, cycles in zip(fleet["pack_id"], fleet["curves"], fleet["cycles"]):
        n = len(cycles)  # each pack has a different cycle history length
        soh, rul = mon.assess(str(pack_id), curves[-n:], cycles[-n:])
        s = soh.item()  # CLEAN: host read of the cloned estimate
        report[str(pack_id)] = {"soh": round(s, 4), "rul_cycles": int(rul.item()), "replace": s < mon.cfg.eol_soh}
        if s < mon.cfg.eol_soh:
            log.warning("pack %s below end-of-life threshold (SOH %.3f)", pack_id, s)
    with open(args.report, "w") as f:
        json.dump(report, f, indent=1)
    print(f"assessed {len(report)} packs in {time.perf_counter() - t0:.1f}s -> {args.report}")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    a = parse_args()
    fit(a) if a.cmd == "fit" else monitor(a)
