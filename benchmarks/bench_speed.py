"""Every approach to one workload side by side, one case at a time (issue 18's measurements).

    python benchmarks/bench_speed.py --workload gpt6x512_b1s64 --out speed.jsonl
    python benchmarks/bench_speed.py --workload demo --modes inference

Each approach is a cgkit recipe (`cgkit scaffold` options), rendered and run by `cgkit smoke` in its
own process, like bench_recipes.py: manual, manual --fuse, the static-I/O variants, callables,
compile with its optimizer step compiled or eager, its gradients from torch.func or autograd. One JSON line per case (the recipe's report with
the workload, the approach and the verdict), appended to --out as each case ends. The peers run in
the same session with benchmarks/peer_anchors.py; write_results.py puts both in one table.
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench_recipes import exit_with, options  # noqa: E402

from cgkit import recipes, smoke  # noqa: E402

# (approach label, workflow, extra scaffold options, modes it applies to)
APPROACHES = (
    ("manual", "manual", {}, ("inference", "training")),
    ("manual --fuse", "manual", {"fuse": True}, ("inference", "training")),
    ("manual --fuse --gradients func", "manual", {"fuse": True, "gradients": "func"}, ("training",)),
    ("manual --static-io", "manual", {"static_io": True}, ("inference",)),
    ("manual --fuse --static-io", "manual", {"fuse": True, "static_io": True}, ("inference",)),
    ("callables", "callables", {}, ("inference", "training")),
    ("callables --static-io", "callables", {"static_io": True}, ("inference",)),
    ("compile", "compile", {}, ("inference", "training")),
    ("compile --static-io", "compile", {"static_io": True}, ("inference",)),
    ("compile --optimizer-step eager", "compile", {"optimizer_step": "eager"}, ("training",)),
    ("compile --gradients autograd", "compile", {"gradients": "autograd"}, ("training",)),
)


def cases(workload: str, modes: list[str], only: list[str] | None):
    for mode in modes:
        for label, workflow, extra, applies in APPROACHES:
            if mode in applies and (not only or label in only):
                opts = options(workload, workflow, mode)
                for name, value in extra.items():
                    setattr(opts, name, value)
                yield label, opts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="demo")
    parser.add_argument("--modes", default="inference,training")
    parser.add_argument("--only", default="", help="comma-separated approach labels (default: all)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    smoke.require_gpu()
    only = [x.strip() for x in args.only.split(",") if x.strip()]
    status = 0
    with tempfile.TemporaryDirectory(prefix="cgkit-speed-") as tmp:
        for number, (label, opts) in enumerate(cases(args.workload, args.modes.split(","), only)):
            path = Path(tmp) / f"case{number}.py"
            recipes.write(opts, path)
            result = smoke.run_recipe(path, timeout=600, locate=False)
            report = result.report.as_json() if result.report else {"error": result.output_tail[-500:]}
            report.pop("traceback", None)
            row = {"workload": args.workload, "approach": label, **report, "verdict": result.verdict}
            status |= result.verdict != smoke.PASSED
            with args.out.open("a") as out:
                out.write(json.dumps(row) + "\n")
            print(json.dumps({k: row.get(k) for k in ("workload", "approach", "mode", "verdict", "graphed_ms",
                                                       "kernel_floor_ms", "graphed_over_floor", "speedup",
                                                       "capture_s", "error")}), flush=True)
    return status


if __name__ == "__main__":
    exit_with(main, __file__)
