"""The DDP recipes at world size 1 and on every GPU of the machine, in one session (issue 15).

For each workload (cgkit's demo, and a model whose gradients fill several of DDP's 25 MB buckets, so
the all-reduce shows in the kernel time) and each DDP recipe (`manual --ddp`: the all-reduce inside
the graph; `callables --ddp`: forward and backward graphed, the all-reduce eager from DDP's hooks),
`cgkit smoke --nproc N --json` runs, and one JSON line is written per run: eager and graphed ms per
step on every rank, the kernel floor, ranks agree (parameters bit-identical across ranks), and the
samples per second of the whole job (world size x batch / graphed step).

    python benchmarks/ddp_scaling.py [--out FILE.jsonl]      # on a machine with 2 or more GPUs
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = {
    # name: (scaffold options, batch per rank, gradient megabytes)
    "demo": ([], 8, 32 * (256 * 256 + 256) * 4 / 2**20),
    "w1024x16": (["--model", f"{ROOT}/benchmarks/workloads.py:demo_w1024_b32_model",
                  "--inputs", f"{ROOT}/benchmarks/workloads.py:demo_w1024_b32_inputs"], 32,
                 16 * (1024 * 1024 + 1024) * 4 / 2**20),
}
RECIPES = ("manual", "callables")


def run(workload: str, recipe: str, nproc: int) -> dict:
    options, batch, grad_mb = WORKLOADS[workload]
    command = [sys.executable, "-m", "cgkit", "smoke", "--workflow", recipe, "--mode", "training", "--ddp",
               "--nproc", str(nproc), "--json", *options]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    try:
        report = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        report = {"error": done.stderr[-1500:]}
    graphed = report.get("graphed_ms")
    return {
        "workload": workload, "recipe": recipe, "world_size": report.get("world_size", nproc),
        "gradient_mb": round(grad_mb, 1), "returncode": done.returncode, "verdict": report.get("verdict"),
        "captured": report.get("captured"), "correct": report.get("correct"), "ranks_agree": report.get("ranks_agree"),
        "eager_ms": report.get("eager_ms"), "graphed_ms": graphed, "speedup": report.get("speedup"),
        "kernel_floor_ms": report.get("kernel_floor_ms"), "graphed_over_floor": report.get("graphed_over_floor"),
        "per_rank": report.get("per_rank"),
        "samples_per_s": round(nproc * batch / graphed * 1e3, 1) if graphed else None,
        "eager_samples_per_s": round(nproc * batch / report["eager_ms"] * 1e3, 1) if report.get("eager_ms") else None,
        "gpu": report.get("gpu"), "torch": report.get("torch"), "error": report.get("error"),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--gpus", type=int, default=0, help="world size of the multi-GPU runs (default: all)")
    args = parser.parse_args(argv)
    import torch

    gpus = args.gpus or torch.cuda.device_count()
    if gpus < 2:
        print(f"ddp_scaling.py needs 2 or more GPUs (this machine has {gpus})", file=sys.stderr)
        return 2
    rows = []
    for workload in WORKLOADS:
        for recipe in RECIPES:
            for nproc in (1, gpus):
                row = run(workload, recipe, nproc)
                rows.append(row)
                print(json.dumps(row), flush=True)
                if args.out:
                    with args.out.open("a") as fh:
                        fh.write(json.dumps(row) + "\n")
    print(f"{'workload':<9} {'recipe':<10} {'gpus':>4} {'eager ms':>9} {'graphed':>8} {'speedup':>7} "
          f"{'floor':>7} {'samples/s':>10} {'agree':>5}", file=sys.stderr)
    for r in rows:
        print(f"{r['workload']:<9} {r['recipe']:<10} {r['world_size']:>4} {r['eager_ms'] or 0:>9.3f} "
              f"{r['graphed_ms'] or 0:>8.3f} {r['speedup'] or 0:>7.2f} {r['kernel_floor_ms'] or 0:>7.3f} "
              f"{r['samples_per_s'] or 0:>10.0f} {str(r['ranks_agree']):>5}", file=sys.stderr)
    ok = all(r["verdict"] == "passed" and (r["world_size"] == 1 or r["ranks_agree"]) for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
