"""Isolated sign-language recognition from body/hand keypoints (WLASL-style glosses).

The pose transformer's forward is decorated with torch.compile(mode="max-autotune"); the
optimizer step is compiled with options={"triton.cudagraphs": True}.

    python sign_language_pose_compiled.py train --keypoints kp/*.npz --epochs 80
    python sign_language_pose_compiled.py demo --ckpt slr.pt --clips demo/*.npz
"""
import argparse
import glob
import json
import logging
import os
import random
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("slr")

N_JOINTS = 75  # 33 body + 21 left hand + 21 right hand
BODY, LHAND, RHAND = slice(0, 33), slice(33, 54), slice(54, 75)


@dataclass
class SLRConfig:
    n_glosses: int = 2000
    max_frames: int = 64
    d_model: int = 256
    layers: int = 6
    heads: int = 8
    batch: int = 64
    epochs: int = 80
    lr: float = 5e-4
    warmup_epochs: int = 5
    label_smoothing: float = 0.1
    pad_clips: bool = False


def parse_args():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--keypoints", default="kp/*.npz")
    t.add_argument("--epochs", type=int, default=80)
    t.add_argument("--ckpt", default="slr.pt")
    t.add_argument("--pad", action="store_true")
    d = sub.add_parser("demo")
    d.add_argument("--ckpt", default="slr.pt")
    d.add_argument("--clips", default="demo/*.npz")
    d.add_argument("--vocab", default="glosses.json")
    return p.parse_args()


# ----------------------------------------------------------------------------- data (host)

def normalize_clip(kp):
    """kp: (T, J, 3) = x, y, confidence from the pose estimator."""
    shoulders = kp[:, [11, 12], :2].mean(1, keepdims=True)
    width = np.linalg.norm(kp[:, 11, :2] - kp[:, 12, :2], axis=-1).mean() + 1e-6
    out = kp.copy()
    out[..., :2] = (kp[..., :2] - shoulders) / width
    return out.astype(np.float32)


class ClipSet:
    def __init__(self, pattern, cfg):
        self.items = []
        for path in sorted(glob.glob(pattern)):
            z = np.load(path)
            self.items.append((normalize_clip(z["kp"]), int(z["gloss"]), bool(z.get("left_handed", False))))
        self.cfg = cfg

    def split(self):
        tr = [it for i, it in enumerate(self.items) if i % 10]
        va = [it for i, it in enumerate(self.items) if i % 10 == 0]
        return tr, va

    def batches(self, items, shuffle, dev):
        items = list(items)
        if shuffle:
            random.shuffle(items)  # CLEAN: host RNG over clip order
        for s in range(0, len(items) - self.cfg.batch + 1, self.cfg.batch):
            chunk = items[s:s + self.cfg.batch]
            t_max = self.cfg.max_frames if self.cfg.pad_clips else max(min(len(c[0]), self.cfg.max_frames) for c in chunk)
            x = np.zeros((len(chunk), t_max, N_JOINTS, 3), dtype=np.float32)
            lengths = []
            for i, (kp, _, _) in enumerate(chunk):
                if shuffle and len(kp) > t_max:
                    start = np.random.randint(0, len(kp) - t_max + 1)  # CLEAN: NumPy RNG temporal crop in the loader
                else:
                    start = 0
                seg = kp[start:start + t_max]
                x[i, :len(seg)] = seg
                lengths.append(len(seg))
            y = torch.tensor([c[1] for c in chunk])  # CLEAN: CPU tensor from a list in the loader
            lefty = [c[2] for c in chunk]
            yield (torch.from_numpy(x).to(dev), torch.tensor(lengths).to(dev), y.to(dev), lefty)


# ----------------------------------------------------------------------------- model

class GraphConv(nn.Module):
    def __init__(self, din, dout):
        super().__init__()
        self.lin = nn.Linear(din, dout)
        self.adj = nn.Parameter(torch.eye(N_JOINTS) + 0.01 * torch.randn(N_JOINTS, N_JOINTS))

    def forward(self, x):
        return F.gelu(self.lin(torch.einsum("ij,btjc->btic", self.adj.softmax(-1), x)))


class PoseTransformer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.gc1 = GraphConv(3, 32)
        self.gc2 = GraphConv(32, 32)
        self.proj = nn.Linear(32 * N_JOINTS, cfg.d_model)
        self.pos = nn.Parameter(torch.zeros(1, cfg.max_frames, cfg.d_model))
        self.blocks = nn.ModuleList([nn.ModuleDict({
            "n1": nn.LayerNorm(cfg.d_model), "qkv": nn.Linear(cfg.d_model, 3 * cfg.d_model),
            "o": nn.Linear(cfg.d_model, cfg.d_model), "n2": nn.LayerNorm(cfg.d_model),
            "ff": nn.Sequential(nn.Linear(cfg.d_model, 4 * cfg.d_model), nn.GELU(), nn.Linear(4 * cfg.d_model, cfg.d_model)),
        }) for _ in range(cfg.layers)])
        self.norm = nn.LayerNorm(cfg.d_model)
        self.mirror = False

    def attend(self, blk, h, key_mask):
        b, t, d = h.shape
        q, k, v = blk["qkv"](blk["n1"](h)).view(b, t, 3, self.cfg.heads, -1).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask[:, None, None, :])
        h = h + blk["o"](a.transpose(1, 2).reshape(b, t, d))
        return h + blk["ff"](blk["n2"](h))

    @torch.compile(mode="max-autotune")
    def forward(self, x, lengths):
        # x: (B, T, J, 3), lengths: (B,)
        conf = x[..., 2]
        if (conf < 0.1).all():  # HAZARD: dynamic-control-flow
            return torch.zeros(x.shape[0], self.cfg.d_model, device=x.device)
        print("mean keypoint confidence", conf.mean())  # HAZARD: host-code
        x[..., :2].sub_(x[:, :1, :1, :2].clone())  # HAZARD: static-address
        if self.mirror:  # HAZARD: python-scalar
            x = torch.cat([x[:, :, BODY], x[:, :, RHAND], x[:, :, LHAND]], 2) * x.new_tensor([-1.0, 1.0, 1.0])
        visible = x[conf > 0.3]  # HAZARD: dynamic-shape
        t_used = int(lengths.max())  # HAZARD: host-sync
        x = x[:, :t_used]
        h = self.gc2(self.gc1(x))
        spread = visible[:, :2].abs().mean().clamp_min(1e-3)
        h = self.proj(h.flatten(2) / spread) + self.pos[:, :t_used]
        key_mask = torch.arange(t_used, device=x.device)[None] < lengths[:, None]  # CLEAN: device mask from arange, no host read
        for blk in self.blocks:
            h = self.attend(blk, h, key_mask)
        h = self.norm(h) * key_mask[..., None]
        return h.sum(1) / lengths[:, None].clamp_min(1)


class GlossHead(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.fc = nn.Sequential(nn.Dropout(0.2), nn.Linear(cfg.d_model, cfg.n_glosses))

    def forward(self, z):
        return self.fc(z)


# ----------------------------------------------------------------------------- training

def topk_acc(logits, y, k):
    top = logits.topk(k, -1).indices
    return (top == y[:, None]).any(-1).float().mean().item()  # CLEAN: metric read in eager evaluation


def train(args):
    cfg = SLRConfig(epochs=args.epochs, pad_clips=args.pad)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)
    data = ClipSet(args.keypoints, cfg)
    tr, va = data.split()
    enc = PoseTransformer(cfg).to(dev)
    head = GlossHead(cfg).to(dev)
    params = list(enc.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=cfg.lr, betas=(0.9, 0.98), weight_decay=0.05)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda e: min(1.0, (e + 1) / cfg.warmup_epochs) * 0.5 * (1 + np.cos(np.pi * e / cfg.epochs)))

    @torch.compile(options={"triton.cudagraphs": True})
    def opt_step():
        opt.step()

    best = 0.0
    for epoch in range(cfg.epochs):
        enc.train()
        head.train()
        t0 = time.time()  # CLEAN: wall clock in the driver loop
        losses = []
        for x, lengths, y, lefty in data.batches(tr, True, dev):
            enc.mirror = sum(lefty) > len(lefty) // 2
            z = enc(x, lengths)  # HAZARD: dynamic-shape
            logits = head(z)
            loss = F.cross_entropy(logits, y, label_smoothing=cfg.label_smoothing)
            losses.append(loss.item())  # CLEAN: eager loss read before backward
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt_step()
        sched.step()  # HAZARD: optimizer
        if epoch == cfg.epochs // 2:
            opt.param_groups[0]["betas"] = (0.95, 0.999)  # HAZARD: optimizer
        top1, top5 = evaluate(enc, head, data, va, dev)
        log.info("epoch %d loss %.3f top1 %.3f top5 %.3f lr %.2e (%.0fs)", epoch, float(np.mean(losses)), top1, top5,
                 sched.get_last_lr()[0], time.time() - t0)
        if top1 > best:
            best = top1
            torch.save({"enc": enc.state_dict(), "head": head.state_dict(), "cfg": cfg.__dict__}, args.ckpt)


@torch.no_grad()
def evaluate(enc, head, data, items, dev):
    enc.eval()
    head.eval()
    t1, t5, n = 0.0, 0.0, 0
    for x, lengths, y, _ in data.batches(items, False, dev):
        logits = head(enc(x.clone(), lengths))
        t1 += topk_acc(logits, y, 1) * len(y)
        t5 += topk_acc(logits, y, 5) * len(y)
        n += len(y)
    return t1 / max(n, 1), t5 / max(n, 1)


# ----------------------------------------------------------------------------- demo (inference)

def calibrate(z, w):
    """Max cosine similarity of the clip embedding to any gloss prototype (open-set confidence)."""
    return F.cosine_similarity(z[:, None], w[None], dim=-1).amax(-1).mean()


def demo(args):
    dev = torch.device("cuda")
    blob = torch.load(args.ckpt, map_location="cpu")
    cfg = SLRConfig(**blob["cfg"])
    enc = PoseTransformer(cfg).to(dev).eval()
    head = GlossHead(cfg).to(dev).eval()
    enc.load_state_dict(blob["enc"])
    head.load_state_dict(blob["head"])
    head_c = torch.compile(head, mode="reduce-overhead")
    calib_c = torch.compile(calibrate, mode="reduce-overhead")
    head_preview = torch.compile(head, mode="max-autotune-no-cudagraphs")
    vocab = json.load(open(args.vocab)) if os.path.exists(args.vocab) else {}
    with torch.no_grad():
        for path in sorted(glob.glob(args.clips)):
            kp = normalize_clip(np.load(path)["kp"])[: cfg.max_frames]
            x = np.zeros((1, cfg.max_frames, N_JOINTS, 3), dtype=np.float32)
            x[0, : len(kp)] = kp
            xt = torch.from_numpy(x).to(dev)
            lengths = torch.tensor([len(kp)], device=dev)  # CLEAN: built outside the compiled functions
            z = enc(xt, lengths).clone()
            logits = head_c(z)
            cal = calib_c(z, head.fc[1].weight)
            probs = logits.softmax(-1)[0].cpu()  # HAZARD: static-address
            conf = cal.float().cpu()  # CLEAN: last compiled output, copied before any other compiled call
            top = probs.topk(5)
            words = [vocab.get(str(i), f"gloss_{i}") for i in top.indices.tolist()]  # CLEAN: host list from a CPU tensor
            pv = head_preview(z)  # CLEAN: no-cudagraphs build, its output is not overwritten
            print(f"{os.path.basename(path)}: {list(zip(words, top.values.numpy().round(3)))} "
                  f"calibrated-conf {conf.item():.3f} preview-max {pv.max().item():.2f}")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    a = parse_args()
    train(a) if a.cmd == "train" else demo(a)
