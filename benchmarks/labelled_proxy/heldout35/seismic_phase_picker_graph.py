"""PhaseNet-style P/S phase picker: eager training + CUDA-graph streaming inference.

Usage:
    python seismic_phase_picker_graph.py train --data waveforms.npz --epochs 20
    python seismic_phase_picker_graph.py serve --ckpt picker.pt --stations 48
"""
import argparse
import json
import logging
import math
import os
import random
import time
from dataclasses import dataclass, field, asdict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

log = logging.getLogger("picker")


@dataclass
class PickerConfig:
    sample_rate: int = 100
    window: int = 3000
    channels: int = 3
    base_width: int = 16
    depth: int = 4
    lr: float = 1e-3
    weight_decay: float = 1e-4
    batch_size: int = 64
    epochs: int = 20
    pick_threshold: float = 0.3
    label_sigma: float = 20.0
    buckets: tuple = (8, 16, 32, 64)
    ckpt_dir: str = "checkpoints"
    extra: dict = field(default_factory=dict)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--data", required=True)
    t.add_argument("--epochs", type=int, default=20)
    t.add_argument("--batch-size", type=int, default=64)
    t.add_argument("--seed", type=int, default=0)
    s = sub.add_parser("serve")
    s.add_argument("--ckpt", required=True)
    s.add_argument("--stations", type=int, default=48)
    s.add_argument("--minutes", type=int, default=10)
    s.add_argument("--gain", type=float, default=1.0)
    return p.parse_args()


# ----------------------------------------------------------------------------- data

def gaussian_label(n, center, sigma):
    t = np.arange(n, dtype=np.float32)
    return np.exp(-0.5 * ((t - center) / sigma) ** 2)


class WaveformDataset(Dataset):
    def __init__(self, path, cfg: PickerConfig, train=True):
        blob = np.load(path)
        self.waves = blob["waves"].astype(np.float32)
        self.p_idx = blob["p_idx"]
        self.s_idx = blob["s_idx"]
        self.cfg = cfg
        self.train = train

    def __len__(self):
        return len(self.waves)

    def __getitem__(self, i):
        w = self.waves[i]
        shift = np.random.randint(-500, 500) if self.train else 0  # CLEAN: NumPy RNG in the data loader, outside any region
        w = np.roll(w, shift, axis=-1)
        w = w - w.mean(axis=-1, keepdims=True)
        w = w / (np.abs(w).max() + 1e-6)
        n = w.shape[-1]
        lab = np.zeros((3, n), dtype=np.float32)
        lab[1] = gaussian_label(n, self.p_idx[i] + shift, self.cfg.label_sigma)
        lab[2] = gaussian_label(n, self.s_idx[i] + shift, self.cfg.label_sigma)
        lab[0] = np.clip(1.0 - lab[1] - lab[2], 0.0, 1.0)
        return torch.from_numpy(w), torch.from_numpy(lab)


def collate(batch):
    waves = torch.stack([b[0] for b in batch])
    labels = torch.stack([b[1] for b in batch])
    lengths = torch.tensor([w.shape[-1] for w, _ in batch])  # CLEAN: CPU tensor from a list in collate, outside any region
    return waves, labels, lengths


# ----------------------------------------------------------------------------- model

class ConvBlock(nn.Module):
    def __init__(self, cin, cout, k=7):
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, k, padding=k // 2)
        self.bn = nn.BatchNorm1d(cout)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class Down(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.block = ConvBlock(cin, cout)
        self.pool = nn.Conv1d(cout, cout, 4, stride=4)

    def forward(self, x):
        h = self.block(x)
        return self.pool(h), h


class Up(nn.Module):
    def __init__(self, cin, cskip, cout):
        super().__init__()
        self.up = nn.ConvTranspose1d(cin, cin, 4, stride=4)
        self.block = ConvBlock(cin + cskip, cout)

    def forward(self, x, skip):
        x = self.up(x)
        x = F.pad(x, (0, skip.shape[-1] - x.shape[-1]))
        return self.block(torch.cat([x, skip], dim=1))


class PhaseNet(nn.Module):
    def __init__(self, cfg: PickerConfig):
        super().__init__()
        w = cfg.base_width
        widths = [w * 2 ** i for i in range(cfg.depth)]
        self.inp = ConvBlock(cfg.channels, w)
        self.downs = nn.ModuleList()
        cin = w
        for cw in widths:
            self.downs.append(Down(cin, cw))
            cin = cw
        self.mid = ConvBlock(cin, cin * 2)
        self.ups = nn.ModuleList()
        cin = cin * 2
        for cw in reversed(widths):
            self.ups.append(Up(cin, cw, cw))
            cin = cw
        self.out = nn.Conv1d(cin, 3, 1)

    def forward(self, x):
        h = self.inp(x)
        skips = []
        for d in self.downs:
            h, s = d(h)
            skips.append(s)  # CLEAN: Python list of activations inside forward, rebuilt identically at capture
        h = self.mid(h)
        for u, s in zip(self.ups, reversed(skips)):
            h = u(h, s)
        return self.out(h)


# ----------------------------------------------------------------------------- training (eager)

def train(args, cfg: PickerConfig):
    torch.manual_seed(args.seed)  # CLEAN: seeding at start-up, no capture running
    random.seed(args.seed)
    np.random.seed(args.seed)
    dev = torch.device("cuda")
    ds = WaveformDataset(args.data, cfg, train=True)
    n_val = max(1, len(ds) // 10)
    tr, va = torch.utils.data.random_split(ds, [len(ds) - n_val, n_val])
    dl = DataLoader(tr, batch_size=args.batch_size, shuffle=True, collate_fn=collate, num_workers=4, pin_memory=True)
    vl = DataLoader(va, batch_size=args.batch_size, collate_fn=collate)
    model = PhaseNet(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=args.epochs * len(dl))
    best = math.inf
    os.makedirs(cfg.ckpt_dir, exist_ok=True)
    for epoch in range(args.epochs):
        model.train()
        t0 = time.time()  # CLEAN: wall clock in the eager training loop
        running = 0.0
        for step, (x, y, _) in enumerate(dl):
            x = x.to(dev, non_blocking=True)  # CLEAN: pinned loader batch uploaded in eager training
            y = y.to(dev, non_blocking=True)
            logits = model(x)
            loss = -(y * F.log_softmax(logits, dim=1)).sum(1).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()  # CLEAN: scheduler on an eager optimizer, nothing captured
            running += loss.item()  # CLEAN: loss read in the eager loop
            if step % 50 == 0:
                log.info("epoch %d step %d loss %.4f lr %.2e", epoch, step, loss.item(), sched.get_last_lr()[0])  # CLEAN: logging outside any region
        val = evaluate(model, vl, cfg, dev)
        print(f"epoch {epoch} train {running / len(dl):.4f} val {val['loss']:.4f} "
              f"p_f1 {val['p_f1']:.3f} s_f1 {val['s_f1']:.3f} ({time.time() - t0:.1f}s)")
        if val["loss"] < best:
            best = val["loss"]
            save_checkpoint(model, cfg, os.path.join(cfg.ckpt_dir, "picker.pt"), epoch, val)


@torch.no_grad()
def evaluate(model, loader, cfg, dev):
    model.eval()
    tot, n = 0.0, 0
    tp = {1: 0, 2: 0}
    fp = {1: 0, 2: 0}
    fn = {1: 0, 2: 0}
    for x, y, _ in loader:
        x, y = x.to(dev), y.to(dev)
        logits = model(x)
        prob = logits.softmax(1)
        tot += -(y * F.log_softmax(logits, 1)).sum(1).mean().item() * len(x)  # CLEAN: eval loss read outside any region
        n += len(x)
        for ph in (1, 2):
            pred_idx = prob[:, ph].argmax(-1)
            true_idx = y[:, ph].argmax(-1)
            has_pick = prob[:, ph].amax(-1) > cfg.pick_threshold
            hits = (pred_idx - true_idx).abs() <= 10
            tp[ph] += int((hits & has_pick).sum())  # CLEAN: host count in eval, not captured
            fp[ph] += int((~hits & has_pick).sum())
            fn[ph] += int((~has_pick).sum())
    out = {"loss": tot / max(n, 1)}
    for ph, name in ((1, "p"), (2, "s")):
        prec = tp[ph] / max(tp[ph] + fp[ph], 1)
        rec = tp[ph] / max(tp[ph] + fn[ph], 1)
        out[f"{name}_f1"] = 2 * prec * rec / max(prec + rec, 1e-9)
    return out


def save_checkpoint(model, cfg, path, epoch, metrics):
    torch.save({"model": model.state_dict(), "cfg": asdict(cfg), "epoch": epoch, "metrics": metrics}, path)
    with open(path + ".json", "w") as f:
        json.dump({"epoch": epoch, **metrics}, f, indent=2)


def load_checkpoint(path, dev):
    blob = torch.load(path, map_location="cpu")
    cfg = PickerConfig(**{k: v for k, v in blob["cfg"].items() if k != "buckets"})
    model = PhaseNet(cfg)
    model.load_state_dict(blob["model"])
    return model.to(dev).eval(), cfg


# ----------------------------------------------------------------------------- CUDA-graph streaming picker

class StreamingPicker:
    """One graph per station-batch bucket, all sharing one memory pool."""

    def __init__(self, model, cfg: PickerConfig, dev, gain=1.0):
        self.model = model
        self.cfg = cfg
        self.dev = dev
        self.gain = gain
        self.channel_order = [2, 1, 0]  # ZNE -> ENZ as the model was trained
        self.taper_np = np.hanning(cfg.window).astype(np.float32)
        self.noise_gen = torch.Generator(device="cuda")
        self.noise_gen.manual_seed(1234)
        self.noise_std = 1e-3
        self.graphs, self.static_in, self.static_out = {}, {}, {}
        self.pool = torch.cuda.graph_pool_handle()
        self.n_forward = 0
        self.last_infer_ts = 0.0
        self.history = []

    def set_gain(self, gain):
        self.gain = gain
        log.info("station gain set to %.3f", gain)

    def _augment_noise(self, x):
        noise = torch.randn(x.shape, generator=self.noise_gen, device=x.device)  # HAZARD: rng
        return x + self.noise_std * noise

    def _infer(self, x):
        taper = torch.from_numpy(self.taper_np).to(self.dev)  # HAZARD: pinned-memory
        order = torch.tensor(self.channel_order, device=x.device)  # HAZARD: host-sync
        x = x.index_select(1, order) * taper
        x = x * self.gain  # HAZARD: python-scalar
        x = self._augment_noise(x)
        x = x / x.abs().amax(-1, keepdim=True).clamp_min(1e-6)  # CLEAN: device-side normalisation, no host read
        probs = self.model(x).softmax(1)
        return self._postprocess(probs)

    def _postprocess(self, probs):
        if probs[:, 1:].max() > 0.999:  # HAZARD: dynamic-control-flow
            probs = probs.clamp(max=0.999)
        strong = probs[probs > self.cfg.pick_threshold]  # HAZARD: dynamic-shape
        self.last_infer_ts = time.time()  # HAZARD: host-code
        self.n_forward += 1  # HAZARD: host-code
        peaks = F.max_pool1d(probs, 31, stride=1, padding=15)
        is_peak = (probs == peaks) & (probs > self.cfg.pick_threshold)
        scored = torch.where(is_peak, probs, torch.zeros_like(probs))  # CLEAN: three-argument where, fixed shape
        return scored, strong

    def _bucket(self, n):
        for b in self.cfg.buckets:
            if n <= b:
                return b
        raise ValueError(f"too many stations: {n}")

    @torch.autocast("cuda", dtype=torch.float16)  # HAZARD: autocast-cache
    def _capture(self, b):
        x = torch.zeros(b, self.cfg.channels, self.cfg.window, device=self.dev)
        self.static_in[b] = x
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # CLEAN: warm-up on a side stream, outside the capture
            for _ in range(3):
                self._infer(x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool):  # CLEAN: own capture stream, warmed up, shared pool
            self.static_out[b] = self._infer(x)
        self.graphs[b] = g

    @torch.no_grad()
    def process(self, batch):
        n = batch.shape[0]
        b = self._bucket(n)
        if b not in self.graphs:
            self._capture(b)
        if n < b:
            batch = F.pad(batch, (0, 0, 0, 0, 0, b - n))
        self.static_in[b] = batch  # HAZARD: static-address
        self.graphs[b].replay()
        return self.static_out[b][0][:n]

    @torch.no_grad()
    def process_copy(self, batch):
        n = batch.shape[0]
        b = self._bucket(n)
        if b not in self.graphs:
            self._capture(b)
        self.static_in[b][:n].copy_(batch)  # CLEAN: copy_ into the static input
        self.static_in[b][n:].zero_()
        self.graphs[b].replay()
        return self.static_out[b][0][:n].clone()  # CLEAN: output cloned before the next replay


def picks_from_probs(probs, thr, sr):
    """Host-side pick extraction for the catalogue (runs on the cloned output)."""
    out = []
    p_cpu = probs.float().cpu().numpy()  # CLEAN: copy to host after replay, not in a capture
    for st in range(p_cpu.shape[0]):
        for ph, name in ((1, "P"), (2, "S")):
            idx = np.nonzero(p_cpu[st, ph] > thr)[0]
            for i in idx.tolist():
                out.append({"station": st, "phase": name, "t": i / sr, "p": float(p_cpu[st, ph, i])})
    return out


def fake_stream(n_stations, cfg, minutes, dev):
    hop = cfg.window // 2
    total = minutes * 60 * cfg.sample_rate
    buf = torch.randn(n_stations, cfg.channels, total, pin_memory=True)  # CLEAN: host RNG to fake a feed, outside any region
    for start in range(0, total - cfg.window, hop):
        yield buf[:, :, start:start + cfg.window].to(dev, non_blocking=True)


def serve(args):
    dev = torch.device("cuda")
    model, cfg = load_checkpoint(args.ckpt, dev)
    picker = StreamingPicker(model, cfg, dev, gain=args.gain)
    preview = StreamingPicker(model, cfg, dev, gain=args.gain)  # quick-look panel, separate graphs
    catalogue = []
    lat = []
    for i, window in enumerate(fake_stream(args.stations, cfg, args.minutes, dev)):
        t0 = time.perf_counter()  # CLEAN: latency timing around the replay, outside the capture
        if i % 20 == 19:
            preview.set_gain(preview.gain * 0.98)
        scored = preview.process(window)
        preview.history.append(scored)  # HAZARD: static-address
        safe = picker.process_copy(window)
        catalogue.extend(picks_from_probs(safe, cfg.pick_threshold, cfg.sample_rate))
        torch.cuda.synchronize()  # CLEAN: sync for timing, outside the capture
        lat.append(time.perf_counter() - t0)
        if i % 100 == 0:
            n_strong = (safe > cfg.pick_threshold).nonzero().shape[0]  # CLEAN: nonzero on a cloned output, outside the capture
            print(f"window {i}: {n_strong} strong samples, mean latency {1e3 * np.mean(lat):.2f} ms")
    with open("catalogue.json", "w") as f:
        json.dump(catalogue, f)
    print(f"{len(catalogue)} picks, p50 latency {1e3 * np.median(lat):.2f} ms")


def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    args = parse_args()
    cfg = PickerConfig()
    if args.cmd == "train":
        cfg.epochs = args.epochs
        cfg.batch_size = args.batch_size
        train(args, cfg)
    else:
        serve(args)


if __name__ == "__main__":
    main()
