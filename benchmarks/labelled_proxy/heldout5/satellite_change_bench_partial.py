"""Micro-benchmarks of a Siamese change-detection net on bi-temporal Sentinel-2 tiles.

Each case is a functools.partial handed to a CUDA-graph benchmark helper.
"""
import functools
import random
import time
import torch
import torch.nn as nn


def bench_graphed(name, fn, *tensors, warmup=5, iters=50):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            fn(*tensors)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn(*tensors)
    g.replay()
    t0 = time.perf_counter()
    for _ in range(iters):
        g.replay()
    torch.cuda.synchronize()  # CLEAN: synchronize for timing, outside the capture
    print(f"{name:>16s}: {(time.perf_counter() - t0) / iters * 1e3:.3f} ms")
    return g, out


def graph_once(fn, *tensors):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # HAZARD: api-misuse
        out = fn(*tensors)
    return g, out


class SiameseCD(nn.Module):
    def __init__(self, bands=13, c=32):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(bands, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
                                 nn.Conv2d(c, 2 * c, 3, stride=2, padding=1), nn.BatchNorm2d(2 * c), nn.ReLU())
        self.dec = nn.Sequential(nn.ConvTranspose2d(4 * c, c, 2, stride=2), nn.ReLU(), nn.Conv2d(c, 1, 1))
        self.sensor_gain = 1.0  # radiometric gain of the first acquisition

    def forward(self, t1, t2):
        gain = self.sensor_gain  # HAZARD: python-scalar
        f1, f2 = self.enc(t1 * gain), self.enc(t2)
        return self.dec(torch.cat([f1 - f2, f1 * f2], 1))


def changed_area_m2(model, t1, t2, thresh=0.5):
    prob = torch.sigmoid(model(t1, t2))
    return (prob > thresh).sum().item() * 100.0  # HAZARD: host-sync


def change_ratio(model, t1, t2, thresh=0.5):
    prob = torch.sigmoid(model(t1, t2))
    return (prob > thresh).float().mean()  # CLEAN: ratio stays on the device


def tta_flip(model, t1, t2):
    if random.random() < 0.5:  # HAZARD: host-code
        t1, t2 = t1.flip(-1), t2.flip(-1)
    return torch.sigmoid(model(t1, t2))


def main():
    torch.backends.cudnn.benchmark = True
    model = SiameseCD().cuda().eval()
    t1 = torch.randn(8, 13, 256, 256, device="cuda")
    t2 = torch.randn_like(t1)
    cases = {
        "forward": functools.partial(model.forward),
        "changed_area": functools.partial(changed_area_m2, model),
        "change_ratio": functools.partial(change_ratio, model, thresh=0.4),
        "tta_flip": functools.partial(tta_flip, model),
    }
    results = {}
    with torch.no_grad():
        for name, fn in cases.items():
            results[name] = bench_graphed(name, fn, t1, t2)
        g_fwd, _ = results["forward"]
        for gain in (0.9, 1.0, 1.1):  # radiometric calibration sweep
            model.sensor_gain = gain
            g_fwd.replay()
        print("changed fraction", results["change_ratio"][1].item())  # CLEAN: .item() on a graph output after replay
        before = torch.cuda.memory_reserved()
        wide = SiameseCD(c=64).cuda().eval()
        graph_once(functools.partial(wide.forward), t1, t2)
        print("wide-variant graph pool MiB", (torch.cuda.memory_reserved() - before) / 2 ** 20)


if __name__ == "__main__":
    main()
