"""Memory/latency benchmark: private vs shared graph pools for multi-resolution backbones.

`bench_cases` takes zero-argument callables (functools.partial over a model and its
static input), captures each one into a CUDA graph, replays it and reports latency
and how much the graph pool reserved.
"""
import functools
import time

import torch
import torch.nn.functional as F
import torchvision


def _capture(fn, pool, stream, warmup=3):
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    g = torch.cuda.CUDAGraph()
    before = torch.cuda.memory_reserved()
    with torch.cuda.graph(g, pool=pool, stream=stream):
        t_cap = time.perf_counter()  # HAZARD: host-code
        out = fn()
    return g, out, torch.cuda.memory_reserved() - before, t_cap


def bench_cases(cases, shared_pool=True, iters=50, sweeps=(None,)):
    pool = torch.cuda.graph_pool_handle() if shared_pool else None
    stream = torch.cuda.Stream()
    report = {}
    for name, fn in sorted(cases.items(), key=lambda kv: -kv[1].keywords.get("res", 0)):
        g, out, reserved, _ = _capture(fn, pool, stream)
        for k, setup in enumerate(sweeps):
            if setup is not None:
                setup()
            torch.cuda.synchronize()  # CLEAN: outside the capture
            t0 = time.perf_counter()  # CLEAN: host timing around replays
            for _ in range(iters):
                g.replay()
            torch.cuda.synchronize()
            ms = (time.perf_counter() - t0) * 1e3 / iters
            report[(name, k)] = dict(ms=ms, pool_mib=reserved / 2**20, checksum=float(out.float().sum()))
    return report


def classify(model, x, res):
    return model(x).softmax(-1)


def detect_centers(model, x, res, score_thr):
    heat = torch.sigmoid(model(x))
    peaks = heat == F.max_pool2d(heat, 3, stride=1, padding=1)
    keep = (heat > score_thr) & peaks  # CLEAN: boolean mask computed on the device
    return torch.where(keep, heat, torch.zeros_like(heat))  # CLEAN: fixed-shape select


def detect_boxes(model, x, res, score_thr):
    heat = torch.sigmoid(model(x)).flatten(1)
    return heat[heat > score_thr]  # HAZARD: dynamic-shape


def timed_classify(model, x, res):
    out = model(x)
    torch.cuda.synchronize()  # HAZARD: host-sync
    return out


class TemperatureProbe:
    def __init__(self, model):
        self.model = model
        self.tau = 1.0

    def __call__(self, x, res):
        tau = self.tau  # HAZARD: python-scalar
        return (self.model(x) / tau).softmax(-1)


def main():
    backbone = torchvision.models.resnet50().cuda().eval()
    heads = torch.nn.Conv2d(3, 80, 3, padding=1).cuda().eval()
    probe = TemperatureProbe(backbone)
    cases = {}
    with torch.no_grad():
        for res in (224, 384, 512):
            x = torch.randn(16, 3, res, res, device="cuda")
            cases[f"cls{res}"] = functools.partial(classify, backbone, x, res=res)
            cases[f"ctr{res}"] = functools.partial(detect_centers, heads, x, res=res, score_thr=0.3)
            cases[f"box{res}"] = functools.partial(detect_boxes, heads, x, res=res, score_thr=0.3)
            cases[f"tcls{res}"] = functools.partial(timed_classify, backbone, x, res=res)
            cases[f"tau{res}"] = functools.partial(probe, x, res=res)
        sweeps = [functools.partial(setattr, probe, "tau", t) for t in (0.5, 1.0, 2.0)]
        for shared in (False, True):
            rep = bench_cases(cases, shared_pool=shared, sweeps=sweeps)
            print("shared" if shared else "private", rep)


if __name__ == "__main__":
    main()
