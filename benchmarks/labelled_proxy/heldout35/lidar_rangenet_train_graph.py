"""LiDAR semantic segmentation on spherical range images (RangeNet/SalsaNext-style).

The whole training step (augment -> forward -> loss -> backward -> optimizer steps) is
captured once with torch.cuda.graph and replayed for every batch.

    python lidar_rangenet_train_graph.py --root /data/semkitti --epochs 50 --batch 8
"""
import argparse
import glob
import logging
import math
import os
import random
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("rangenet")

LEARNING_MAP = {0: 0, 1: 0, 10: 1, 11: 2, 13: 5, 15: 3, 16: 5, 18: 4, 20: 5, 30: 6, 31: 7, 32: 8,
                40: 9, 44: 10, 48: 11, 49: 12, 50: 13, 51: 14, 52: 0, 60: 9, 70: 15, 71: 16, 72: 17,
                80: 18, 81: 19, 99: 0, 252: 1, 253: 7, 254: 6, 255: 8, 256: 5, 257: 5, 258: 4, 259: 5}


@dataclass
class TrainConfig:
    h: int = 64
    w: int = 2048
    in_ch: int = 5
    n_classes: int = 20
    width: int = 32
    batch: int = 8
    epochs: int = 50
    lr: float = 1e-3
    aux_lr: float = 5e-4
    warmup: int = 1000
    point_drop: float = 0.1
    class_freq: list = field(default_factory=lambda: [0.0] + [1.0 / 19] * 19)
    out: str = "runs/rangenet"


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--root", default="/data/semkitti")
    p.add_argument("--epochs", type=int, default=50)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--val-seq", default="08")
    p.add_argument("--no-graph", action="store_true")
    return p.parse_args()


# ----------------------------------------------------------------------------- projection + data (host)

def spherical_projection(points, remission, h, w, fov_up=3.0, fov_down=-25.0):
    fov_up, fov_down = np.radians(fov_up), np.radians(fov_down)
    depth = np.linalg.norm(points, axis=1)
    yaw = -np.arctan2(points[:, 1], points[:, 0])
    pitch = np.arcsin(points[:, 2] / np.maximum(depth, 1e-6))
    u = np.clip(np.floor(0.5 * (yaw / np.pi + 1.0) * w), 0, w - 1).astype(np.int64)
    v = np.clip(np.floor((1.0 - (pitch - fov_down) / (fov_up - fov_down)) * h), 0, h - 1).astype(np.int64)
    order = np.argsort(depth)[::-1]
    img = np.zeros((5, h, w), dtype=np.float32)
    idx = np.full((h, w), -1, dtype=np.int64)
    img[0, v[order], u[order]] = depth[order]
    img[1:4, v[order], u[order]] = points[order].T
    img[4, v[order], u[order]] = remission[order]
    idx[v[order], u[order]] = order
    return img, idx


class ScanFolder:
    def __init__(self, root, seqs, cfg):
        self.scans = []
        for s in seqs:
            self.scans += sorted(glob.glob(os.path.join(root, "sequences", s, "velodyne", "*.bin")))
        self.cfg = cfg
        lut = np.zeros(max(LEARNING_MAP) + 1, dtype=np.int64)
        for k, v in LEARNING_MAP.items():
            lut[k] = v
        self.lut = lut

    def load(self, path):
        pts = np.fromfile(path, dtype=np.float32).reshape(-1, 4)
        lab = np.fromfile(path.replace("velodyne", "labels").replace(".bin", ".label"), dtype=np.uint32) & 0xFFFF
        img, idx = spherical_projection(pts[:, :3], pts[:, 3], self.cfg.h, self.cfg.w)
        lab_img = np.where(idx >= 0, self.lut[lab[np.maximum(idx, 0)]], 0)
        return img, lab_img

    def batches(self, batch, shuffle):
        paths = list(self.scans)
        if shuffle:
            random.shuffle(paths)  # CLEAN: host RNG over the file list, outside the captured step
        for s in range(0, len(paths) - batch + 1, batch):
            items = [self.load(p) for p in paths[s:s + batch]]
            x = torch.from_numpy(np.stack([i[0] for i in items])).pin_memory()
            y = torch.from_numpy(np.stack([i[1] for i in items])).pin_memory()
            yield x, y


# ----------------------------------------------------------------------------- model

class ResBlock(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1)
        self.c2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.n1, self.n2 = nn.BatchNorm2d(cout), nn.BatchNorm2d(cout)
        self.skip = nn.Conv2d(cin, cout, 1, stride=stride) if (cin != cout or stride != 1) else nn.Identity()
        self.drop = nn.Dropout2d(0.1)

    def forward(self, x):
        h = F.leaky_relu(self.n1(self.c1(x)), 0.1)
        h = self.drop(self.n2(self.c2(h)))  # CLEAN: dropout on the default CUDA generator, capturable
        return F.leaky_relu(h + self.skip(x), 0.1)


class RangeSeg(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        w = cfg.width
        self.enc = nn.ModuleList([ResBlock(cfg.in_ch, w), ResBlock(w, 2 * w, (1, 2)), ResBlock(2 * w, 4 * w, 2),
                                  ResBlock(4 * w, 8 * w, 2)])
        self.dec = nn.ModuleList([ResBlock(8 * w + 4 * w, 4 * w), ResBlock(4 * w + 2 * w, 2 * w),
                                  ResBlock(2 * w + w, w)])
        self.head = nn.Conv2d(w, cfg.n_classes, 1)
        self.aux_head = nn.Conv2d(4 * w, cfg.n_classes, 1)

    def forward(self, x):
        skips = []
        for blk in self.enc:
            x = blk(x)
            skips.append(x)
        aux = self.aux_head(skips[-2])
        for blk, s in zip(self.dec, reversed(skips[:-1])):
            x = F.interpolate(x, size=s.shape[-2:], mode="bilinear", align_corners=False)
            x = blk(torch.cat([x, s], 1))
        return self.head(x), aux


# ----------------------------------------------------------------------------- captured step

class GraphedTrainer:
    def __init__(self, model, cfg, dev):
        self.model = model
        self.cfg = cfg
        self.dev = dev
        head_params = list(model.aux_head.parameters())
        body_params = [p for n, p in model.named_parameters() if not n.startswith("aux_head")]
        self.opt = torch.optim.AdamW(body_params, lr=cfg.lr, weight_decay=1e-4, capturable=True)
        self.opt_aux = torch.optim.Adam(head_params, lr=cfg.aux_lr)
        self.drop_gen = torch.Generator(device=dev)
        self.drop_gen.manual_seed(11)
        self.metric_stream = torch.cuda.Stream()
        self.step_seed = 1234
        self.static_scan = torch.zeros(cfg.batch, cfg.in_ch, cfg.h, cfg.w, device=dev)
        self.static_label = torch.zeros(cfg.batch, cfg.h, cfg.w, dtype=torch.long, device=dev)
        self.confusion = torch.zeros(cfg.n_classes, cfg.n_classes, dtype=torch.long, device=dev)
        self.graph = None

    def augment(self, x):
        torch.manual_seed(self.step_seed)  # HAZARD: rng
        keep = torch.rand(x.shape[0], 1, x.shape[2], x.shape[3], device=x.device, generator=self.drop_gen) > self.cfg.point_drop  # HAZARD: rng
        x = x * keep
        if random.random() < 0.5:  # HAZARD: host-code
            x = x.flip(-1)
        scale = 1.0 + 0.05 * torch.randn(x.shape[0], 1, 1, 1, device=x.device)  # CLEAN: default CUDA generator, capturable
        return torch.cat([x[:, :1] * scale, x[:, 1:4] * scale, x[:, 4:]], 1)

    def loss(self, logits, aux, y):
        weights = torch.tensor(self.cfg.class_freq, device=y.device)  # HAZARD: host-sync
        w = 1.0 / (weights + 1e-3)
        w[0] = 0.0
        ce = F.cross_entropy(logits, y, weight=w)
        valid = y > 0
        probs = logits.softmax(1).permute(0, 2, 3, 1)[valid]  # HAZARD: dynamic-shape
        lovasz_proxy = 1.0 - probs.max(-1).values.mean()
        aux_ce = F.cross_entropy(F.interpolate(aux, size=y.shape[-2:], mode="nearest"), y, weight=w)
        return ce + 0.5 * lovasz_proxy + 0.3 * aux_ce

    def step(self, x, y):
        x = self.augment(x)
        with torch.autocast("cuda", dtype=torch.bfloat16):  # CLEAN: autocast entered inside the capture
            logits, aux = self.model(x)
        loss = self.loss(logits.float(), aux.float(), y)
        if loss.isnan():  # HAZARD: dynamic-control-flow
            loss = torch.zeros_like(loss)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)  # CLEAN: no host read without error_if_nonfinite
        self.opt.step()  # CLEAN: capturable AdamW
        self.opt_aux.step()  # HAZARD: optimizer
        with torch.cuda.stream(self.metric_stream):  # HAZARD: stream
            pred = logits.argmax(1)
            self.confusion.index_put_((y.flatten(), pred.flatten()), torch.ones_like(y.flatten()), accumulate=True)
        return loss.detach()

    def capture(self):
        self.model.train()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.opt.zero_grad(set_to_none=True)
                self.opt_aux.zero_grad(set_to_none=True)
                self.step(self.static_scan, self.static_label)
        torch.cuda.current_stream().wait_stream(s)
        self.opt.zero_grad(set_to_none=True)
        self.opt_aux.zero_grad(set_to_none=True)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_loss = self.step(self.static_scan, self.static_label)
            print(f"captured training step, loss placeholder {self.static_loss}")  # HAZARD: host-sync
        self.confusion.zero_()

    def run(self, x, y):
        self.static_scan.copy_(x, non_blocking=True)  # CLEAN: copy_ into the static input
        self.static_label.copy_(y, non_blocking=True)
        self.graph.replay()
        return self.static_loss


# ----------------------------------------------------------------------------- evaluation + main

@torch.no_grad()
def evaluate(model, data, cfg, dev, limit=200):
    model.eval()
    conf = torch.zeros(cfg.n_classes, cfg.n_classes, dtype=torch.long, device=dev)
    for i, (x, y) in enumerate(data.batches(cfg.batch, shuffle=False)):
        if i >= limit:
            break
        x, y = x.to(dev), y.to(dev)
        pred = model(x)[0].argmax(1)
        valid = y > 0
        conf.index_put_((y[valid], pred[valid]), torch.ones_like(y[valid]), accumulate=True)  # CLEAN: mask indexing in eager evaluation
    inter = conf.diag().float()
    union = conf.sum(0).float() + conf.sum(1).float() - inter
    iou = (inter / union.clamp_min(1))[1:]
    model.train()
    return iou.mean().item(), iou.cpu().tolist()  # CLEAN: host read after evaluation


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO)
    cfg = TrainConfig(epochs=args.epochs, batch=args.batch)
    dev = torch.device("cuda")
    random.seed(0)
    torch.manual_seed(0)  # CLEAN: seeding once at start-up, before any capture
    train_seqs = [f"{i:02d}" for i in range(11) if f"{i:02d}" != args.val_seq]
    train_data = ScanFolder(args.root, train_seqs, cfg)
    val_data = ScanFolder(args.root, [args.val_seq], cfg)
    model = RangeSeg(cfg).to(dev)
    trainer = GraphedTrainer(model, cfg, dev)
    trainer.capture()
    os.makedirs(cfg.out, exist_ok=True)
    it, best = 0, 0.0
    steps_per_epoch = len(train_data.scans) // cfg.batch
    for epoch in range(cfg.epochs):
        t0 = time.time()  # CLEAN: epoch timer outside the capture
        losses = []
        for x, y in train_data.batches(cfg.batch, shuffle=True):
            if it < cfg.warmup:
                lr = cfg.lr * (it + 1) / cfg.warmup
            else:
                lr = 0.5 * cfg.lr * (1 + math.cos(math.pi * it / (cfg.epochs * steps_per_epoch)))
            for g in trainer.opt.param_groups:
                g["lr"] = lr  # HAZARD: optimizer
            trainer.step_seed = 1234 + it
            if it % 1000 == 999:
                trainer.static_scan = x.to(dev)  # HAZARD: static-address
            loss = trainer.run(x.to(dev, non_blocking=True), y.to(dev, non_blocking=True))
            losses.append(loss.item())  # CLEAN: host read after the replay
            it += 1
        miou, per_class = evaluate(model, val_data, cfg, dev)
        log.info("epoch %d loss %.4f mIoU %.3f (%.0fs)", epoch, float(np.mean(losses)), miou, time.time() - t0)
        print("per-class IoU:", " ".join(f"{v:.2f}" for v in per_class))
        if miou > best:
            best = miou
            torch.save({"model": model.state_dict(), "epoch": epoch, "miou": miou}, os.path.join(cfg.out, "best.pt"))
    print(f"best mIoU {best:.3f}")


if __name__ == "__main__":
    main()
