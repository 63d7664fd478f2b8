"""Low-dose CT denoising (RED-CNN style residual encoder-decoder).

Training compiles the network, the loss and the optimizer step with
torch.compile(mode="reduce-overhead"). Inference over full 512x512 slices uses a manually
captured CUDA graph of overlapping tiles with Gaussian blending.

    python ct_denoise_compiled.py train --pairs data/ldct/*.npz --iters 100000
    python ct_denoise_compiled.py denoise --ckpt redcnn.pt --series series/*.npz --preset lung
"""
import argparse
import glob
import logging
import os
import random
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("ldct")

PRESETS = {"lung": (-600.0, 1500.0), "soft": (40.0, 400.0), "bone": (400.0, 1800.0)}


@dataclass
class CTConfig:
    channels: int = 96
    patch: int = 64
    patch_choices: tuple = (48, 64, 80)
    batch: int = 32
    lr: float = 1e-4
    weight_decay: float = 0.0
    iters: int = 100_000
    perc_w: float = 0.0
    tile: int = 128
    overlap: int = 32
    hu_min: float = -1024.0
    hu_max: float = 3071.0


def parse_args():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--pairs", default="data/ldct/*.npz")
    t.add_argument("--iters", type=int, default=100_000)
    t.add_argument("--multiscale", action="store_true")
    t.add_argument("--ckpt", default="redcnn.pt")
    d = sub.add_parser("denoise")
    d.add_argument("--ckpt", default="redcnn.pt")
    d.add_argument("--series", default="series/*.npz")
    d.add_argument("--preset", choices=sorted(PRESETS), default="soft")
    d.add_argument("--out", default="denoised")
    return p.parse_args()


# ----------------------------------------------------------------------------- data (host)

def hu_to_unit(img, cfg):
    return (np.clip(img, cfg.hu_min, cfg.hu_max) - cfg.hu_min) / (cfg.hu_max - cfg.hu_min)


class PatchSampler:
    def __init__(self, pattern, cfg):
        self.pairs = []
        for path in sorted(glob.glob(pattern)):
            z = np.load(path)
            self.pairs.append((hu_to_unit(z["low"], cfg).astype(np.float32), hu_to_unit(z["full"], cfg).astype(np.float32)))
        self.cfg = cfg
        log.info("%d slice pairs", len(self.pairs))

    def sample(self, patch):
        lo, hi = [], []
        for _ in range(self.cfg.batch):
            a, b = random.choice(self.pairs)  # CLEAN: host RNG in the patch sampler
            y0 = random.randrange(0, a.shape[0] - patch)
            x0 = random.randrange(0, a.shape[1] - patch)
            k = random.randrange(4)
            lo.append(np.rot90(a[y0:y0 + patch, x0:x0 + patch], k).copy())
            hi.append(np.rot90(b[y0:y0 + patch, x0:x0 + patch], k).copy())
        return (torch.from_numpy(np.stack(lo))[:, None].pin_memory(),
                torch.from_numpy(np.stack(hi))[:, None].pin_memory())


# ----------------------------------------------------------------------------- model + loss

class REDCNN(nn.Module):
    def __init__(self, c=96):
        super().__init__()
        self.enc = nn.ModuleList([nn.Conv2d(1 if i == 0 else c, c, 5) for i in range(5)])
        self.dec = nn.ModuleList([nn.ConvTranspose2d(c, 1 if i == 4 else c, 5) for i in range(5)])

    def forward(self, x):
        res = [x]
        h = x
        for i, conv in enumerate(self.enc):
            h = F.relu(conv(h))
            if i in (1, 3):  # CLEAN: branch on a Python loop index, not on a tensor
                res.append(h)
        for i, deconv in enumerate(self.dec):
            h = deconv(h)
            if i == 1:
                h = h + res.pop()
            elif i == 3:
                h = h + res.pop()
            elif i == 4:
                h = h + res.pop()
            h = F.relu(h) if i < 4 else h
        return h


class EdgeLoss(nn.Module):
    def __init__(self):
        super().__init__()
        k = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]])
        self.register_buffer("sobel", torch.stack([k, k.t()])[:, None])
        self.perc_w = 0.0

    def forward(self, pred, target):
        mse = F.mse_loss(pred, target)
        ge = F.conv2d(pred, self.sobel, padding=1)
        gt = F.conv2d(target, self.sobel, padding=1)
        edge = F.l1_loss(ge, gt)
        psnr = -10.0 * torch.log10(mse.detach() + 1e-10)
        print("train psnr", psnr)  # HAZARD: host-code
        if psnr > 45.0:  # HAZARD: dynamic-control-flow
            edge = edge * 2.0
        return mse + self.perc_w * edge  # HAZARD: python-scalar


# ----------------------------------------------------------------------------- training

def train(args):
    cfg = CTConfig(iters=args.iters)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    random.seed(0)
    sampler = PatchSampler(args.pairs, cfg)
    model = REDCNN(cfg.channels).to(dev)
    crit = EdgeLoss().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    model_c = torch.compile(model, mode="reduce-overhead")
    crit_c = torch.compile(crit, mode="reduce-overhead")

    @torch.compile(mode="reduce-overhead")
    def opt_step():
        opt.step()

    t0 = time.time()  # CLEAN: wall clock in the driver loop
    hist = []
    for it in range(cfg.iters):
        crit.perc_w = 0.0 if it < 20_000 else 0.1
        patch = random.choice(cfg.patch_choices) if args.multiscale else cfg.patch
        lo, hi = sampler.sample(patch)
        lo = lo.to(dev, non_blocking=True)
        hi = hi.to(dev, non_blocking=True)
        pred = model_c(lo)  # HAZARD: dynamic-shape
        loss = crit_c(pred, hi)
        hist.append(loss.detach().clone())  # CLEAN: cloned before backward and the compiled step
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt_step()
        if it == 60_000:
            for g in opt.param_groups:
                g["weight_decay"] = 1e-5  # HAZARD: optimizer
        if it % 1000 == 0:
            mean = torch.stack(hist).mean().item()  # CLEAN: host read of cloned losses
            hist.clear()
            print(f"iter {it:6d} loss {mean:.3e} ({(time.time() - t0) / (it + 1) * 1e3:.1f} ms/it)")
        if it % 10_000 == 9_999:
            torch.save({"model": model.state_dict(), "iter": it}, args.ckpt)


# ----------------------------------------------------------------------------- tiled inference (manual capture)

def gaussian_map(tile, sigma_frac=0.125):
    ax = np.arange(tile) - (tile - 1) / 2.0
    g = np.exp(-0.5 * (ax / (tile * sigma_frac)) ** 2)
    m = np.outer(g, g).astype(np.float32)
    return m / m.max()


class TiledDenoiser:
    def __init__(self, model, cfg, dev, size=512):
        self.model = model.eval()
        self.infer_net = torch.compile(model)
        self.cfg = cfg
        self.dev = dev
        self.size = size
        step = cfg.tile - cfg.overlap
        self.origins = [(y, x) for y in range(0, size - cfg.tile + 1, step) for x in range(0, size - cfg.tile + 1, step)]
        self.weight_np = gaussian_map(cfg.tile)
        self.blend_stream = torch.cuda.Stream()
        self.window_center, self.window_width = PRESETS["soft"]
        self.static_in = torch.zeros(1, 1, size, size, device=dev)
        self.static_out = torch.zeros(1, 1, size, size, device=dev)
        self.norm = torch.zeros(1, 1, size, size, device=dev)
        self.graph = torch.cuda.CUDAGraph()
        self.series_out = []

    def set_preset(self, name):
        self.window_center, self.window_width = PRESETS[name]

    def _tiles(self, net, x):
        t = self.cfg.tile
        tiles = torch.cat([x[:, :, y:y + t, xx:xx + t] for y, xx in self.origins], 0)  # CLEAN: Python-int slice bounds, fixed tile grid
        return net(tiles)

    def _blend(self, den):
        t = self.cfg.tile
        w = torch.from_numpy(self.weight_np).to(self.dev)  # HAZARD: pinned-memory
        with torch.cuda.stream(self.blend_stream):  # HAZARD: stream
            self.static_out.zero_()
            self.norm.zero_()
            for k, (y, xx) in enumerate(self.origins):
                self.static_out[:, :, y:y + t, xx:xx + t] += den[k:k + 1] * w
                self.norm[:, :, y:y + t, xx:xx + t] += w
        torch.cuda.synchronize()  # HAZARD: host-sync
        return self.static_out / self.norm.clamp_min(1e-6)

    def _window(self, img):
        hu = img * (self.cfg.hu_max - self.cfg.hu_min) + self.cfg.hu_min
        lo, width = self.window_center - self.window_width / 2.0, self.window_width  # HAZARD: python-scalar
        return ((hu - lo) / width).clamp(0.0, 1.0)

    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._window(self._blend(self._tiles(self.model, self.static_in)))
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):  # CLEAN: warmed up, captured on the graph's own stream
            den = self._tiles(self.infer_net, self.static_in)  # HAZARD: api-misuse
            self.static_disp = self._window(self._blend(den))

    @torch.no_grad()
    def __call__(self, slice_unit):
        self.static_in.copy_(slice_unit)  # CLEAN: copy_ into the static input
        self.graph.replay()
        self.series_out.append(self.static_disp)  # HAZARD: static-address
        return self.static_disp.clone()  # CLEAN: clone handed to the caller


def denoise(args):
    cfg = CTConfig()
    dev = torch.device("cuda")
    model = REDCNN(cfg.channels).to(dev)
    model.load_state_dict(torch.load(args.ckpt, map_location="cpu")["model"])
    den = TiledDenoiser(model, cfg, dev)
    den.capture()
    os.makedirs(args.out, exist_ok=True)
    for path in sorted(glob.glob(args.series)):
        z = np.load(path)
        den.set_preset(str(z["preset"]) if "preset" in z.files else args.preset)
        vol = hu_to_unit(z["low"], cfg).astype(np.float32)
        out = np.zeros_like(vol)
        t0 = time.perf_counter()
        for i in range(vol.shape[0]):
            x = torch.from_numpy(vol[i]).to(dev)[None, None]  # CLEAN: upload before the replay, outside the capture
            out[i] = den(x)[0, 0].cpu().numpy()  # CLEAN: host copy of the cloned result
        noise_before = float(np.std(np.diff(vol, axis=-1)))
        noise_after = float(np.std(np.diff(out, axis=-1)))
        np.savez_compressed(os.path.join(args.out, os.path.basename(path)), display=out)
        print(f"{os.path.basename(path)}: {vol.shape[0]} slices in {time.perf_counter() - t0:.1f}s, "
              f"noise proxy {noise_before:.4f} -> {noise_after:.4f}")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    a = parse_args()
    train(a) if a.cmd == "train" else denoise(a)
