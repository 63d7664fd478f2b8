"""benchmarks/write_results.py: how a GPU run's JSON becomes RESULTS.md tables (CPU only)."""

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "write_results.py"
spec = importlib.util.spec_from_file_location("write_results", SCRIPT)
write_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(write_results)


def bench_part(path, rows):
    path.write_text(json.dumps({"meta": {"date": "2026-11-29"}, "rows": rows}))
    return path


def test_a_case_measured_again_in_a_later_part_replaces_the_earlier(tmp_path):
    first = bench_part(tmp_path / "recipes-bench-a.json", [
        {"workload": "demo", "workflow": "manual", "mode": "inference", "graphed_ms": 0.35},
        {"workload": "mlp", "workflow": "manual", "mode": "inference", "graphed_ms": 0.12},
    ])
    again = bench_part(tmp_path / "recipes-bench-demo.json", [
        {"workload": "demo", "workflow": "manual", "mode": "inference", "graphed_ms": 0.15},
    ])
    rows = write_results.latest_rows([first, again])
    assert {(r["workload"], r["graphed_ms"]) for r in rows} == {("demo", 0.15), ("mlp", 0.12)}


def test_te_and_megatron_cases_get_their_own_table(tmp_path):
    reports = tmp_path / "recipe-reports-te.jsonl"
    cases = [
        {"args": ["--workflow", "mcore-full", "--timeout", "600"],
         "report": {"workflow": "mcore-full", "verdict": "passed", "eager_ms": 47.6, "graphed_ms": 2.7,
                    "kernel_floor_ms": 1.5, "speedup": 17.5, "max_abs_diff": 0.0, "losses_eager": [7.0] * 8}},
        {"args": ["--workflow", "manual"], "report": {"workflow": "manual", "verdict": "passed"}},
    ]
    reports.write_text("\n".join(json.dumps(c) for c in cases) + "\n")
    table = write_results.te_megatron_table([reports])
    assert len(table) == 3  # header, rule, and the one Megatron case; the manual case is not in it
    assert table[2].startswith("| `--workflow mcore-full` | passed | 47.6000 | 2.7000 |")
    assert "| 17.50 |" in table[2] and "| 8 |" in table[2]


def test_experiment_tables_copy_their_numbers(tmp_path):
    calls = tmp_path / "compile-call-cost.jsonl"
    calls.write_text(json.dumps({"workload": "mlp", "ms": {"peer": 0.1, "replay_only": 0.1, "recipe": 0.12},
                                 "over_peer": {"peer": 1.0, "replay_only": 1.0, "recipe": 1.2}}) + "\n")
    assert write_results.compile_call_table(calls)[2] == "| mlp | 0.1000 | 0.1000 | 0.1200 | 1.000 | 1.200 |"
    effect = tmp_path / "profiler-effect.jsonl"
    effect.write_text("\n".join(json.dumps({"before_ms": {"eager": b, "graph": 0.14}, "after_ms": {"eager": 1.0, "graph": 0.14},
                                            "after_over_before": {"eager": 1.0 / b, "graph": 1.0}}) for b in (0.8, 0.5)))
    rows = write_results.profiler_effect_table(effect)
    assert len(rows) == 4 and rows[3].startswith("| 2 | 0.5000 | 1.0000 | 2.000 |")


def test_a_multi_line_error_stays_in_one_table_row(tmp_path):
    reports = tmp_path / "recipe-reports.jsonl"
    reports.write_text(json.dumps({"args": ["--workflow", "manual"],
                                   "report": {"verdict": "failed", "error": "CUDA error\nSearch for it"}}) + "\n")
    assert write_results.cases_table([reports])[2].endswith("| CUDA error Search for it |")
