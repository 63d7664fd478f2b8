"""Eager vs graphed vs the kernel-time floor, for every workflow and mode, in one GPU run.

    python benchmarks/bench_recipes.py                       # every default case
    python benchmarks/bench_recipes.py --workloads demo      # only the demo model's cases

Each (workload, workflow, mode) is rendered by `cgkit scaffold` and run by `cgkit smoke` in its own
process, so the numbers are those a user gets from the generated script. Every report carries
eager_ms, graphed_ms, kernel_floor_ms (the summed GPU time of the eager step's kernels, from
torch.profiler, run after the timing) and graphed_kernel_ms (the same for the graphed step), so the
ratios are from one process on one machine. Results go to
benchmarks/results/recipes.json; benchmarks/write_results.py turns them into RESULTS.md.
"""

import argparse
import datetime
import json
import platform
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from cgkit import recipes, smoke  # noqa: E402

WORKLOADS = ("demo", "gpt6x512_b1s64", "mlp16x512_b8")
WORKFLOWS = ("manual", "callables", "compile")
MODES = ("inference", "training")
# The MLP is there to compare with the anchors, which measured these four on it.
ANCHOR_ONLY = {"mlp16x512_b8": {("manual", "inference"), ("manual", "training"), ("compile", "inference"),
                                ("callables", "training")}}


def default_cases(workloads):
    for workload in workloads:
        for workflow in WORKFLOWS:
            for mode in MODES:
                if (workflow, mode) in ANCHOR_ONLY.get(workload, {(workflow, mode)}):
                    yield workload, workflow, mode


def options(workload: str, workflow: str, mode: str) -> recipes.ScaffoldOptions:
    refs = {}
    if workload != "demo":
        refs = {"model": f"{HERE / 'workloads.py'}:{workload}_model", "inputs": f"{HERE / 'workloads.py'}:{workload}_inputs"}
    return recipes.ScaffoldOptions(workflow=workflow, mode=mode, **refs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--out", type=Path, default=HERE / "results" / "recipes.json")
    args = parser.parse_args()
    gpu_torch = smoke.require_gpu()
    meta = {"date": datetime.date.today().isoformat(), "torch": gpu_torch, "python": platform.python_version()}
    rows = []
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cgkit-bench-") as tmp:
        for workload, workflow, mode in default_cases(args.workloads.split(",")):
            path = Path(tmp) / f"{workload}_{workflow}_{mode}.py"
            recipes.write(options(workload, workflow, mode), path)
            result = smoke.run_recipe(path, timeout=900)
            report = result.report.as_json() if result.report else {"error": result.output_tail[-500:]}
            row = {"workload": workload, "workflow": workflow, "mode": mode, **report, "verdict": result.verdict}
            row.pop("traceback", None)
            rows.append(row)
            print(json.dumps({k: row.get(k) for k in ("workload", "workflow", "mode", "verdict", "eager_ms",
                              "graphed_ms", "replay_only_ms", "kernel_floor_ms", "speedup", "graphed_over_floor",
                              "error")}), flush=True)
            # Written after every case, so a run cut short still leaves what it measured.
            args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return 0 if all(r["verdict"] == "passed" for r in rows) else 1


def exit_with(main, script: str) -> None:
    """Exit with main()'s status; without a GPU, with status 2 and smoke's message."""
    try:
        sys.exit(main())
    except smoke.NoGPU as exc:
        print(f"{Path(script).name}: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    exit_with(main, __file__)
