"""Which kernels torch.compile runs for cgkit's demo MLP, vs eager, and what the BLAS choice costs (GPU).

    python benchmarks/compile_kernels.py [--width 256] [--batch 8]

For each variant prints the wall time per step (CUDA events), the GPU time per step, and the three
costliest kernels (torch.profiler, run after the timing). Variants: eager; eager captured in one
torch.cuda.graph; torch.compile with mode="reduce-overhead" and with the default mode, each under
PyTorch's default BLAS choice and with torch.backends.cuda.preferred_blas_library("cublaslt").
"""

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_recipes import exit_with  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    from cgkit import smoke

    smoke.require_gpu()
    import torch
    from torch.profiler import ProfilerActivity, profile

    layers = [m for _ in range(32) for m in (torch.nn.Linear(args.width, args.width), torch.nn.GELU())]
    model = torch.nn.Sequential(*layers).cuda().eval()
    x = torch.randn(args.batch, args.width, device="cuda")

    def time_ms(fn, iters=200, repeats=5):
        samples = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / iters)
        return sorted(samples)[len(samples) // 2]

    def graphed_eager():
        graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                model(x)
        torch.cuda.current_stream().wait_stream(stream)
        with torch.cuda.graph(graph):
            model(x)
        return graph.replay

    def compiled(mode):
        torch._dynamo.reset()
        fn = torch.compile(model, mode=mode)

        def step():
            torch.compiler.cudagraph_mark_step_begin()
            fn(x)

        return step

    variants = {
        "eager": lambda: (lambda: model(x)),
        "torch.cuda.graph": graphed_eager,
        "compile reduce-overhead": lambda: compiled("reduce-overhead"),
        "compile default": lambda: compiled("default"),
    }
    results = []
    with torch.no_grad():
        for blas in ("default", "cublaslt"):
            torch.backends.cuda.preferred_blas_library(blas)
            for name, build in variants.items():
                fn = build()
                for _ in range(10):
                    fn()
                torch.cuda.synchronize()
                wall = time_ms(fn)
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(10):
                        fn()
                    torch.cuda.synchronize()
                kernels = Counter()
                for event in prof.events():
                    if event.device_type == torch.autograd.DeviceType.CUDA:
                        kernels[event.name[:80]] += event.device_time / 10 / 1000
                results.append({"blas": blas, "variant": name, "wall_ms": round(wall, 4),
                                "gpu_ms": round(sum(kernels.values()), 4),
                                "top_kernels": [[k, round(ms, 4)] for k, ms in kernels.most_common(3)]})
                print(json.dumps(results[-1]), flush=True)
    torch.backends.cuda.preferred_blas_library("default")
    return 0


if __name__ == "__main__":
    exit_with(main, __file__)
