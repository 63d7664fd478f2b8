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
from demo_timing import captured, demo_model, time_ms  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    from cgkit import smoke

    smoke.require_gpu()
    import torch
    from torch.profiler import ProfilerActivity, profile

    model, x = demo_model(args.width, args.batch)

    def compiled(mode):
        torch._dynamo.reset()
        fn = torch.compile(model, mode=mode)

        def step():
            torch.compiler.cudagraph_mark_step_begin()
            fn(x)

        return step

    variants = {
        "eager": lambda: (lambda: model(x)),
        "torch.cuda.graph": lambda: captured(lambda: model(x)),
        "compile reduce-overhead": lambda: compiled("reduce-overhead"),
        "compile default": lambda: compiled("default"),
    }
    results = []
    with torch.no_grad():
        for blas in ("default", "cublaslt"):
            torch.backends.cuda.preferred_blas_library(blas)
            for name, build in variants.items():
                fn = build()
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
