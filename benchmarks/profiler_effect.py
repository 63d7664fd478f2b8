"""Does a torch.profiler session slow the launches that follow it? One process, demo MLP (GPU).

    python benchmarks/profiler_effect.py [--rounds 3]

Times cgkit's demo model eager and as one torch.cuda.graph replay, `--rounds` times each, then runs
one profiler session like the recipes' (CUDA activity, 10 steps), then times both again. Prints one
JSON line with the median ms of each phase and the after/before ratio. Run it in several processes
to see how much eager time moves between processes on the same machine.
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_recipes import exit_with  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from cgkit import smoke

    smoke.require_gpu()
    import torch
    from torch.profiler import ProfilerActivity, profile

    model = torch.nn.Sequential(*[m for _ in range(32) for m in (torch.nn.Linear(256, 256), torch.nn.GELU())])
    model = model.cuda().eval()
    x = torch.randn(8, 256, device="cuda")

    def time_ms(fn, iters=200, repeats=5):
        for _ in range(10):
            fn()
        samples = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / iters)
        return statistics.median(samples)

    with torch.no_grad():
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                model(x)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            model(x)
        calls = {"eager": lambda: model(x), "graph": graph.replay}

        def phase():
            return {name: statistics.median(time_ms(fn) for _ in range(args.rounds)) for name, fn in calls.items()}

        before = phase()
        with profile(activities=[ProfilerActivity.CUDA]):
            for _ in range(10):
                model(x)
            torch.cuda.synchronize()
        after = phase()
    print(json.dumps({
        "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
        "before_ms": {k: round(v, 4) for k, v in before.items()},
        "after_ms": {k: round(v, 4) for k, v in after.items()},
        "after_over_before": {k: round(after[k] / before[k], 3) for k in before},
    }))
    return 0


if __name__ == "__main__":
    exit_with(main, __file__)
