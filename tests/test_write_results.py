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


def test_skill_facts_get_one_row_each_with_values_and_error(tmp_path):
    facts = tmp_path / "skill-facts.jsonl"
    rows = [{"fact": "shape", "ok": True, "rows": [{"batch": 16, "reserved_mb": 96.0}, {"batch": 32, "reserved_mb": 98.0}],
             "skips": 0, "torch": "2.11.0+cu130", "device": "NVIDIA H200"},
            {"fact": "seed", "ok": False, "error": "RuntimeError: a | b", "torch": "2.11.0+cu130", "device": "NVIDIA H200"}]
    facts.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    table = write_results.skill_facts_table(facts)
    assert table[0] == "torch 2.11.0+cu130, device NVIDIA H200."
    assert table[4] == "| shape | yes | rows batch 16 reserved_mb 96.0; batch 32 reserved_mb 98.0, skips 0 | - |"
    assert table[5] == "| seed | no | - | RuntimeError: a \\| b |"


def test_speed_table_keeps_the_rerun_and_sets_peers_beside_the_approaches(tmp_path):
    def row(approach, verdict, graphed_ms):
        return {"workload": "gpt", "approach": approach, "mode": "training", "verdict": verdict,
                "graphed_ms": graphed_ms, "kernel_floor_ms": 1.7, "graphed_over_floor": graphed_ms and graphed_ms / 1.7}

    (tmp_path / "speed-gpt.jsonl").write_text(json.dumps(row("manual --fuse", "failed", None)) + "\n")
    (tmp_path / "speed-gpt2.jsonl").write_text(json.dumps(row("manual --fuse", "passed", 1.04)) + "\n")
    (tmp_path / "peer-anchors.jsonl").write_text(json.dumps(
        {"workload": "gpt", "phase": "training", "kernel_floor_ms": 1.9, "eager_ms": 13.4,
         "full_iteration_graph_ms": 2.12}) + "\n" + json.dumps(
        {"workload": "other", "phase": "training", "kernel_floor_ms": 1.0, "eager_ms": 2.0,
         "full_iteration_graph_ms": 1.5}) + "\n")
    table = write_results.speed_table(tmp_path)
    fused = [line for line in table if "manual --fuse" in line]
    assert len(fused) == 1 and "| passed |" in fused[0] and "1.0400" in fused[0]
    peers = [line for line in table if "peer:" in line]
    assert len(peers) == 1 and "| gpt |" in peers[0] and "2.1200" in peers[0]  # no peer rows for other workloads


def test_bench_speed_renders_every_approach_for_both_workloads():
    import sys

    sys.path.insert(0, str(SCRIPT.parent))
    import bench_speed

    from cgkit import recipes

    for workload in ("demo", "gpt6x512_b1s64"):
        labels = []
        for label, opts in bench_speed.cases(workload, ["inference", "training"], None):
            recipes.plan(opts)
            labels.append((label, opts.mode))
        assert ("manual --fuse", "training") in labels and ("compile --optimizer-step eager", "training") in labels
        assert ("compile --gradients autograd", "training") in labels
        assert ("manual --fuse --static-io", "inference") in labels and len(labels) == 15
