"""Write benchmarks/RESULTS.md from the JSON results of a GPU run.

    python benchmarks/write_results.py RUN_DIR

RUN_DIR holds what scripts/gpu_suite.sh wrote: machine.json, recipes-bench*.json (one or more bench
runs), and optionally recipe-reports*.jsonl (every smoke test case) and check_rules_gpu.json.
Numbers are copied, never edited.
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ANCHORS = HERE / "anchors-h200-2026-11-29.jsonl"


def load_anchors() -> dict:
    """The earlier measurements on the same machine kind, keyed by (workload, phase)."""
    anchors = {}
    for line in ANCHORS.read_text().splitlines():
        row = json.loads(line)
        if "workload" in row:
            anchors.setdefault((row["workload"], row["phase"]), {}).update(row)
    return anchors


def fmt(value, digits=4):
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def bench_table(rows: list[dict], anchors: dict) -> list[str]:
    out = ["| workload | workflow | mode | verdict | eager ms | graphed ms | kernel floor ms | speedup | graphed / floor "
           "| graph MB | anchor ms |", "|" + "---|" * 11]
    anchor_keys = {("manual", "inference"): "manual_graph_ms", ("compile", "inference"): "compile_reduce_overhead_ms",
                   ("callables", "training"): "make_graphed_callables_ms", ("manual", "training"): "full_iteration_graph_ms"}
    for r in rows:
        anchor = anchors.get((r["workload"], r["mode"]), {}).get(anchor_keys.get((r["workflow"], r["mode"]), ""))
        out.append(
            f"| {r['workload']} | {r['workflow']} | {r['mode']} | {r['verdict']} | {fmt(r.get('eager_ms'))} "
            f"| {fmt(r.get('graphed_ms'))} | {fmt(r.get('kernel_floor_ms'))} | {fmt(r.get('speedup'), 2)} "
            f"| {fmt(r.get('graphed_over_floor'), 3)} | {fmt(r.get('graph_memory_mb'), 1)} | {fmt(anchor)} |"
        )
        if r.get("error"):
            out.append(f"| | | | error: {r['error'][:160]} | | | | | | | |")
    return out


def cases_table(path: Path) -> list[str]:
    out = ["| case | verdict | speedup | graphed / floor | graph MB | note |", "|---|---|---|---|---|---|"]
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        case = json.loads(line)
        r = case["report"]
        note = r.get("error") or ""
        if r.get("cudagraph_skips") is not None:
            note = f"cudagraph skips: {r['cudagraph_skips']}"
        if r.get("ranks_agree") is not None:
            note = f"ranks agree: {r['ranks_agree']} (world size {r.get('world_size')})"
        out.append(f"| `{' '.join(case['args'])}` | {r.get('verdict')} | {fmt(r.get('speedup'), 2)} "
                   f"| {fmt(r.get('graphed_over_floor'), 3)} | {fmt(r.get('graph_memory_mb'), 1)} | {note[:120]} |")
    return out


def main() -> int:
    run = Path(sys.argv[1])
    machine = json.loads((run / "machine.json").read_text())
    parts = sorted(run.glob("recipes-bench*.json"))
    bench = {"meta": json.loads(parts[0].read_text())["meta"],
             "rows": [row for part in parts for row in json.loads(part.read_text())["rows"]]}
    lines = [
        "# Benchmark results",
        "",
        f"Machine: {machine['gpu']} (x{machine['gpus']}), torch {machine['torch']}, CUDA {machine['cuda']}, "
        f"Python {machine['python']}. Date: {bench['meta']['date']}. Written by `benchmarks/write_results.py` "
        "from one run of `scripts/gpu_suite.sh` (rerun it to refresh).",
        "",
        "## Recipes: eager vs graphed vs the kernel-time floor",
        "",
        "Each row is one generated recipe run by `cgkit smoke` in its own process (`benchmarks/bench_recipes.py`).",
        "eager and graphed are median ms per step (CUDA events); the kernel floor is the summed GPU time of the eager",
        "step's kernels (torch.profiler), which no replay can beat. `anchor ms` is the same workload and API measured",
        "earlier on the same machine kind (`benchmarks/anchors-h200-2026-11-29.jsonl`).",
        "",
        *bench_table(bench["rows"], load_anchors()),
    ]
    cases = run / "recipe-reports.jsonl"
    if cases.exists():
        lines += ["", "## Every smoke test case (tests/gpu)", "",
                  "Run 4 at a time (pytest -n 4), so these speedups are lower bounds; the table above is the clean one.",
                  "", *cases_table(cases)]
    extra = HERE / "RESULTS-extra.md"
    if extra.exists():
        lines += ["", extra.read_text().strip()]
    (HERE / "RESULTS.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {HERE / 'RESULTS.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
