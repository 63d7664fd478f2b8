"""Latency benchmarks for cloud / cloud-shadow masking on Sentinel-2 L1C tiles (13 bands). Each case is a
functools.partial handed to a CUDA-graph timing helper (warm-up, capture, timed replays)."""
import functools
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

BOA_ADD_OFFSET = np.full(13, -1000.0, np.float32)  # radiometric offset of processing baseline 04.00
QUANTIFICATION = 10000.0

def bench(fn, warmup=3, iters=50, amp=True):
    side = torch.cuda.Stream()
    with torch.autocast("cuda", dtype=torch.float16, enabled=amp):  # HAZARD: autocast-cache
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
    torch.cuda.synchronize()  # CLEAN: synchronize outside the capture, before timing
    t0 = time.perf_counter()
    for _ in range(iters):
        g.replay()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e3

class TinyUNet(nn.Module):
    def __init__(self, bands=13, classes=4, c=32):
        super().__init__()
        self.down1 = nn.Sequential(nn.Conv2d(bands, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1), nn.ReLU())
        self.down2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(c, 2 * c, 3, padding=1), nn.ReLU())
        self.up = nn.ConvTranspose2d(2 * c, c, 2, 2)
        self.head = nn.Conv2d(2 * c, classes, 1)

    def forward(self, x):
        a = self.down1(x)
        return self.head(torch.cat([a, self.up(self.down2(a))], 1))

def unet_mask(model, x):
    return model(x).softmax(1)

def unet_mask_offset(model, x):
    off = torch.from_numpy(BOA_ADD_OFFSET).cuda().view(1, -1, 1, 1)  # HAZARD: pinned-memory
    return model((x + off) / QUANTIFICATION).softmax(1)

def unet_mask_offset_pinned(model, x, off_host, off_dev):
    off_dev.copy_(off_host, non_blocking=True)  # CLEAN: copy from pinned host memory is recorded
    return model((x + off_dev.view(1, -1, 1, 1)) / QUANTIFICATION).softmax(1)

def tta_mask(model, x, gen):
    flip = torch.rand((), device=x.device, generator=gen) > 0.5  # HAZARD: rng
    return model(torch.where(flip, x.flip(-1), x)).softmax(1)

def tta_mask_default_gen(model, x):
    flip = torch.rand((), device=x.device) > 0.5  # CLEAN: default CUDA generator is capturable
    return model(torch.where(flip, x.flip(-1), x)).softmax(1)

def cloud_fraction(model, x, stats):
    mask = model(x).argmax(1)
    stats["cloud_fraction"] = (mask == 1).float().mean().item()  # HAZARD: host-sync

def mask_with_band_stats(model, x, stats_stream, out):
    probs = model(x).softmax(1)
    with torch.cuda.stream(stats_stream):  # HAZARD: stream
        out.copy_(probs.mean((0, 2, 3)))
    return probs

if __name__ == "__main__":
    model = TinyUNet().cuda().eval()
    x = torch.rand(4, 13, 512, 512, device="cuda") * QUANTIFICATION
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    off_host = torch.from_numpy(BOA_ADD_OFFSET).pin_memory()
    off_dev = torch.empty(13, device="cuda")
    stats, band_out = {}, torch.empty(4, device="cuda")
    cases = {
        "unet": functools.partial(unet_mask, model, x),
        "unet+offset": functools.partial(unet_mask_offset, model, x),
        "unet+offset(pinned)": functools.partial(unet_mask_offset_pinned, model, x, off_host, off_dev),
        "tta(private gen)": functools.partial(tta_mask, model, x, gen),
        "tta(default gen)": functools.partial(tta_mask_default_gen, model, x),
        "cloud fraction": functools.partial(cloud_fraction, model, x, stats),
        "band stats": functools.partial(mask_with_band_stats, model, x, torch.cuda.Stream(), band_out),
    }
    with torch.no_grad():
        for name, fn in cases.items():
            print(f"{name:>22s}: {bench(fn):7.3f} ms/tile-batch")
