"""What `cgkit trace` costs: one recorded call of a step against one eager call, same process, same device.

For each workload and mode, the step is built the way `cgkit trace` builds it (cgkit.trace.steps), then
eager calls and recorded calls (both torch modes on, operators logged for the comparison between
calls) are timed interleaved, medians taken. The bar (issue 11): a traced step costs at most 10x an
eager one. Runs on the CPU and on a GPU (synchronized before each clock read).

    python benchmarks/trace_cost.py [--device cpu|cuda] [--out FILE.jsonl]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = {
    # name: (model ref, inputs ref)
    "demo": ("benchmarks/trace_cost.py:demo_model", "benchmarks/trace_cost.py:demo_inputs"),
    "gpt6x512": ("benchmarks/workloads.py:gpt6x512_b1s64_model", "benchmarks/workloads.py:gpt6x512_b1s64_inputs"),
    "tinygpt": ("tests/models/tiny_gpt.py:build", "tests/models/tiny_gpt.py:example_batch"),
}


def demo_model():
    """cgkit's built-in demo: 32 x (Linear(256) + GELU)."""
    import torch

    return torch.nn.Sequential(*[m for _ in range(32) for m in (torch.nn.Linear(256, 256), torch.nn.GELU())])


def demo_inputs():
    import torch

    return (torch.randn(8, 256),)


def measure(name: str, mode: str, device_name: str, repeats: int) -> dict:
    import torch

    from cgkit.trace import steps
    from cgkit.trace.recorder import Recorder

    device = steps.resolve_device(device_name)
    recorder = Recorder(device.type)
    model_ref, inputs_ref = (str(ROOT / ref.split(":")[0]) + ":" + ref.split(":")[1] for ref in WORKLOADS[name])
    with recorder.active():
        step = steps.model_step(model_ref, inputs_ref, mode == "training", device, None, "adam", None, recorder)
    args, kwargs = steps.split_inputs(step.inputs)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def eager():
        step.run(args, kwargs)

    def traced():
        with recorder.active(), recorder.recording("call"):
            step.run(args, kwargs)

    for fn in (eager, traced, eager, traced):  # warm-up: lazy set-up, optimizer state, caches
        fn()
    eager_s, traced_s = [], []
    for _ in range(repeats):
        for fn, samples in ((eager, eager_s), (traced, traced_s)):
            sync()
            start = time.perf_counter()
            fn()
            sync()
            samples.append(time.perf_counter() - start)
    operators = len(recorder.last_log)
    eager_ms, traced_ms = statistics.median(eager_s) * 1e3, statistics.median(traced_s) * 1e3
    return {"workload": name, "mode": mode, "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
            "torch": torch.__version__, "operators": operators, "eager_ms": round(eager_ms, 3),
            "traced_ms": round(traced_ms, 3), "ratio": round(traced_ms / eager_ms, 2), "repeats": repeats,
            "findings": len(recorder.observations)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    rows = [measure(name, mode, args.device, args.repeats) for name in WORKLOADS for mode in ("inference", "training")]
    print(f"{'workload':<10} {'mode':<10} {'ops':>6} {'eager ms':>9} {'traced ms':>10} {'ratio':>6}  device")
    for r in rows:
        print(f"{r['workload']:<10} {r['mode']:<10} {r['operators']:>6} {r['eager_ms']:>9.3f} {r['traced_ms']:>10.3f} "
              f"{r['ratio']:>5.2f}x  {r['device']}")
    if args.out:
        with args.out.open("a") as fh:
            for r in rows:
                fh.write(json.dumps(r) + "\n")
    return 0 if all(r["ratio"] <= 10 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
