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
from demo_timing import captured, demo_model, time_ms  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from cgkit import smoke

    smoke.require_gpu()
    import torch
    from torch.profiler import ProfilerActivity, profile

    model, x = demo_model()
    with torch.no_grad():
        calls = {"eager": lambda: model(x), "graph": captured(lambda: model(x))}

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
