import statistics
import time

import torch
import torch.nn as nn


def bench_eager(fn, iters=100):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()  # CLEAN: timing sync around eager calls, no capture active
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


class GraphBench:
    """Unrolls `iters` calls of fn into one graph and times a replay."""

    def __init__(self, fn, iters=100):
        self.fn = fn
        self.iters = iters
        self.graph = torch.cuda.CUDAGraph()
        self.host_times = []

    def capture(self):
        for _ in range(3):
            self.fn()
        torch.cuda.synchronize()
        self.graph.capture_begin()  # HAZARD: stream
        for _ in range(self.iters):
            t0 = time.perf_counter()  # HAZARD: host-code
            self.fn()
            self.host_times.append(time.perf_counter() - t0)  # HAZARD: host-code
        torch.cuda.synchronize()  # HAZARD: host-sync
        self.graph.capture_end()

    def run(self, repeats=20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        samples = []
        for _ in range(repeats):
            start.record()
            self.graph.replay()
            end.record()
            end.synchronize()  # CLEAN: event sync after replay, outside the capture
            samples.append(start.elapsed_time(end) * 1e3 / self.iters)
        return statistics.median(samples)


def sweep_matmul(sizes=(256, 512, 1024, 2048)):
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    results = {}
    for n in sizes:
        a = torch.randn(n, n, device="cuda", dtype=torch.half)
        b = torch.randn(n, n, device="cuda", dtype=torch.half)
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                torch.mm(a, b)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g, stream=s):  # HAZARD: api-misuse
            c = torch.mm(a, b)
        g.replay()
        results[n] = c.float().abs().mean().item()  # CLEAN: .item() after replay, outside capture
    return results


def train_step_fn():
    model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 512)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(64, 512, device="cuda")

    def fn():
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()  # HAZARD: optimizer
        opt.zero_grad(set_to_none=False)
    return fn


if __name__ == "__main__":
    x = torch.randn(4096, device="cuda")
    tiny = lambda: x.mul_(1.0001).add_(1e-4)  # noqa: E731
    print("eager us/call", bench_eager(tiny))
    gb = GraphBench(tiny)
    gb.capture()
    print("graph us/call", gb.run())
    print(sweep_matmul())
    step = GraphBench(train_step_fn(), iters=10)
    step.capture()
    print("train step us", step.run())
