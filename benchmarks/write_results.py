"""Write benchmarks/RESULTS.md from the JSON results of a GPU run.

    python benchmarks/write_results.py RUN_DIR [--also EARLIER/recipe-reports-te.jsonl ...]

RUN_DIR holds what scripts/gpu_suite.sh wrote: machine.json, recipes-bench*.json (one or more bench
runs), and optionally recipe-reports*.jsonl (every smoke test case), check_rules_gpu.json,
peer-anchors.jsonl (benchmarks/peer_anchors.py run in the same session), compile-call-cost.jsonl
(benchmarks/compile_call_cost.py), profiler-effect.jsonl and compile-kernels.jsonl (the scripts of
those names). `--also` adds smoke reports from an earlier run (say, the Transformer Engine cases,
which need their own set-up); their tables name the file. Numbers are copied, never edited.
"""

import argparse
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from cgkit.report import RecipeReport  # noqa: E402  (the report's one definition)

ANCHORS = HERE / "anchors-h200-2026-11-29.jsonl"


def load_anchors(path: Path = ANCHORS) -> dict:
    """Anchor measurements (a JSON line per workload and phase), keyed by (workload, phase)."""
    anchors = {}
    if not path.exists():
        return anchors
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if "workload" in row:
            anchors.setdefault((row["workload"], row["phase"]), {}).update(row)
    return anchors


def json_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip().startswith("{")]


def fmt(value, digits=4):
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def bench_table(rows: list[dict], anchors: dict, peers: dict) -> list[str]:
    out = ["| workload | workflow | mode | verdict | eager ms | graphed ms | kernel floor ms | graph kernels ms | speedup "
           "| graphed / floor | replay-only ms | graph MB | peer ms (same session) | anchor ms |", "|" + "---|" * 14]
    anchor_keys = {("manual", "inference"): "manual_graph_ms", ("compile", "inference"): "compile_reduce_overhead_ms",
                   ("callables", "training"): "make_graphed_callables_ms", ("manual", "training"): "full_iteration_graph_ms"}
    for r in rows:
        key = anchor_keys.get((r["workflow"], r["mode"]), "")
        anchor = anchors.get((r["workload"], r["mode"]), {}).get(key)
        peer = peers.get((r["workload"], r["mode"]), {}).get(key)
        out.append(
            f"| {r['workload']} | {r['workflow']} | {r['mode']} | {r['verdict']} | {fmt(r.get('eager_ms'))} "
            f"| {fmt(r.get('graphed_ms'))} | {fmt(r.get('kernel_floor_ms'))} | {fmt(r.get('graphed_kernel_ms'))} "
            f"| {fmt(r.get('speedup'), 2)} "
            f"| {fmt(r.get('graphed_over_floor'), 3)} | {fmt(r.get('replay_only_ms'))} | {fmt(r.get('graph_memory_mb'), 1)} "
            f"| {fmt(peer)} | {fmt(anchor)} |"
        )
        if r.get("error"):
            out.append(f"| | | | error: {r['error'][:160]} | | | | | | | | | | |")
    return out


def latest_rows(parts: list[Path]) -> list[dict]:
    """The bench rows of every part; a case measured again in a later part (by file name) replaces the earlier."""
    rows = {}
    for part in parts:
        for row in json.loads(part.read_text())["rows"]:
            rows[(row["workload"], row["workflow"], row["mode"])] = row
    return list(rows.values())


def te_megatron_table(paths: list[Path]) -> list[str]:
    """The te, mcore-layer and mcore-full smoke cases: one training step, eager vs graphed."""
    out = ["| case | verdict | eager ms | graphed ms | kernel floor ms | speedup | graphed / floor | max abs diff "
           "| steps compared | graph MB |", "|" + "---|" * 10]
    cases = [case for path in paths for case in json_lines(path)]
    for case in sorted(cases, key=lambda c: " ".join(c["args"])):
        r = RecipeReport.from_json(case["report"])
        if r.workflow not in ("te", "mcore-layer", "mcore-full"):
            continue
        args = case["args"][:case["args"].index("--timeout")] if "--timeout" in case["args"] else case["args"]
        args = " ".join(args)
        out.append(f"| `{args}` | {r.unknown.get('verdict')} | {fmt(r.eager_ms)} | {fmt(r.graphed_ms)} "
                   f"| {fmt(r.kernel_floor_ms)} | {fmt(r.speedup, 2)} | {fmt(r.graphed_over_floor, 3)} "
                   f"| {fmt(r.max_abs_diff, 6)} | {len(r.losses_eager or [])} | {fmt(r.graph_memory_mb, 1)} |")
    return out if len(out) > 2 else []


def cases_table(paths: list[Path]) -> list[str]:
    out = ["| case | verdict | speedup | graphed / floor | graph MB | note |", "|---|---|---|---|---|---|"]
    cases = [case for path in paths for case in json_lines(path)]
    for case in sorted(cases, key=lambda c: " ".join(c["args"])):
        r = RecipeReport.from_json(case["report"]) if case["report"] else RecipeReport()
        note = " ".join((r.error or "").split())  # one table row: no line breaks
        if r.cudagraph_skips is not None:
            note = f"cudagraph skips: {r.cudagraph_skips}"
        if r.ranks_agree is not None:
            note = f"ranks agree: {r.ranks_agree} (world size {r.world_size})"
        args = " ".join(a if "/" not in a else a.split("/")[-1] for a in case["args"])
        out.append(f"| `{args}` | {r.unknown.get('verdict')} | {fmt(r.speedup, 2)} "
                   f"| {fmt(r.graphed_over_floor, 3)} | {fmt(r.graph_memory_mb, 1)} | {note[:120]} |")
    return out


def te_sweep_table(paths: list[Path]) -> list[str]:
    out = ["| case | hidden | tokens | eager ms | graphed ms | kernel floor ms | speedup |", "|---|---|---|---|---|---|---|"]
    for path in paths:
        for case in json_lines(path):
            for row in case.get("report", {}).get("sweep") or []:
                out.append(f"| `{' '.join(case['args'][:4])}` | {row['hidden']} | {row['tokens']} | {fmt(row.get('eager_ms'))} "
                           f"| {fmt(row.get('graphed_ms'))} | {fmt(row.get('kernel_floor_ms'))} | {fmt(row.get('speedup'), 2)} |")
    return out if len(out) > 2 else []


def check_table(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    out = [f"torch {data['torch']} on {data['device']}.", "",
           "| rule | Example | Use instead | confirmed |", "|---|---|---|---|"]
    for code, r in sorted(data["rules"].items()):
        if "skipped" in r:
            out.append(f"| {code} | skipped: {r['skipped']} | | |")
        else:
            out.append(f"| {code} {r['name']} | {r['example']['status']} | {r['use_instead']['status']} "
                       f"| {'yes' if r['confirmed'] else '**no**'} |")
    return out


def compile_call_table(path: Path) -> list[str]:
    """benchmarks/compile_call_cost.py: three forms of the compiled call, one process, interleaved."""
    out = ["| workload | peer ms | recipe's bare call ms | recipe's call ms (clones outputs) | bare / peer "
           "| call / peer |", "|---|---|---|---|---|---|"]
    for r in json_lines(path):
        ms, ratio = r["ms"], r["over_peer"]
        out.append(f"| {r['workload']} | {fmt(ms['peer'])} | {fmt(ms['replay_only'])} | {fmt(ms['recipe'])} "
                   f"| {fmt(ratio['replay_only'], 3)} | {fmt(ratio['recipe'], 3)} |")
    return out


def profiler_effect_table(path: Path) -> list[str]:
    """benchmarks/profiler_effect.py: eager and replay timed before and after one profiler session."""
    out = ["| process | eager before ms | eager after ms | eager after / before | graph before ms | graph after ms "
           "| graph after / before |", "|---|---|---|---|---|---|---|"]
    for n, r in enumerate(json_lines(path), 1):
        b, a, q = r["before_ms"], r["after_ms"], r["after_over_before"]
        out.append(f"| {n} | {fmt(b['eager'])} | {fmt(a['eager'])} | {fmt(q['eager'], 3)} | {fmt(b['graph'])} "
                   f"| {fmt(a['graph'])} | {fmt(q['graph'], 3)} |")
    return out


def compile_kernels_table(path: Path) -> list[str]:
    """benchmarks/compile_kernels.py: wall and GPU time per step, and the costliest kernel, per variant."""
    out = ["| BLAS preference | variant | wall ms | GPU ms | costliest kernel (ms per step) |", "|---|---|---|---|---|"]
    for r in json_lines(path):
        name, ms = r["top_kernels"][0]
        out.append(f"| {r['blas']} | {r['variant']} | {fmt(r['wall_ms'])} | {fmt(r['gpu_ms'])} | `{name[:60]}` ({fmt(ms)}) |")
    return out


def trace_rules_table(capture: Path, traced: Path) -> list[str]:
    """Each rule's Example under real capture (test_rules_gpu) beside what `cgkit trace --device cuda` found."""
    runs = json.loads(capture.read_text())["rules"] if capture.exists() else {}
    data = json.loads(traced.read_text())
    out = [f"torch {data['torch']} on {data['device']}.", "",
           "| rule | Example under capture | trace finds it at line | Use instead under trace |", "|---|---|---|---|"]
    for code in sorted(set(runs) | set(data["rules"])):
        run, found = runs.get(code, {}), data["rules"].get(code)
        status = run["example"]["status"] if "example" in run else ("skipped" if "skipped" in run else "-")
        if found is None:
            out.append(f"| {code} | {status} | not traced (see the rule's `trace_blind`) | |")
            continue
        lines = ", ".join(map(str, found["found_at"])) or "**not found**"
        clean = "clean" if not found["use_instead_findings"] and not found["errors"] else f"**{found}**"
        out.append(f"| {code} | {status} | {lines} | {clean} |")
    return out


def trace_cost_table(path: Path) -> list[str]:
    out = ["| device | workload | mode | operators | eager ms | traced ms | traced / eager |", "|---|---|---|---|---|---|---|"]
    for r in json_lines(path):
        out.append(f"| {r['device']} | {r['workload']} | {r['mode']} | {r['operators']} | {fmt(r['eager_ms'], 3)} "
                   f"| {fmt(r['traced_ms'], 3)} | {fmt(r['ratio'], 2)} |")
    return out


def baseline_table(path: Path) -> list[str]:
    out = ["| candidate | exit | verdict | lines | numbers | within baseline spread | graph replays | speedup (spread) "
           "| first divergence |", "|---|---|---|---|---|---|---|---|---|"]
    for case in json_lines(path):
        r = case["report"]
        d = r.get("divergence")
        where = f"line {d['baseline']['line']}: `{d['baseline']['text']}` vs `{d['candidate']['text']}`" if d else "-"
        spread = r.get("speedup_spread") or [None, None]
        out.append(f"| {Path(case['candidate']).name} {' '.join(case.get('options', []))} | {case['returncode']} "
                   f"| {'passed' if r.get('passed') else 'failed'} | {r.get('lines_matched')} | {r.get('numbers_compared')} "
                   f"| {r.get('numbers_within_baseline_spread', 0)} | {r.get('graph_replays')} "
                   f"| {fmt(r.get('speedup'), 2)} ({fmt(spread[0], 2)}-{fmt(spread[1], 2)}) | {where} |")
    return out


def facts_table(path: Path) -> list[str]:
    out = ["| fact | torch | measured |", "|---|---|---|"]
    for r in json_lines(path):
        if "fact" in r:
            values = {k: v for k, v in r.items() if k not in ("fact", "torch")}
            out.append(f"| {r['fact']} | {r['torch']} | `{json.dumps(values)}` |")
        else:
            for f in r["facts"]:
                out.append(f"| source: {f['id']} | {r['torch']} | {'holds' if f['found'] else '**gone**'}: "
                           f"`{f.get('line', f['where'])}` |")
    return out


def ddp_table(path: Path) -> list[str]:
    out = ["| workload | recipe | GPUs | gradients MB | verdict | ranks agree | eager ms (per rank) | graphed ms (per rank) "
           "| speedup | kernel floor ms (per rank) | samples/s graphed | samples/s eager |", "|" + "---|" * 12]
    def per(ranks, key):
        return " / ".join(fmt(x[key], 3) for x in ranks)

    for r in json_lines(path):
        ranks = r.get("per_rank") or []
        out.append(f"| {r['workload']} | {r['recipe']} | {r['world_size']} | {r['gradient_mb']} | {r['verdict']} "
                   f"| {r['ranks_agree']} | {per(ranks, 'eager_ms')} | {per(ranks, 'graphed_ms')} | {fmt(r['speedup'], 2)} "
                   f"| {per(ranks, 'kernel_floor_ms')} | {fmt(r['samples_per_s'], 0)} | {fmt(r['eager_samples_per_s'], 0)} |")
    return out


def speed_table(folder: Path) -> list[str]:
    """benchmarks/bench_speed.py: every approach to a workload, one case at a time; a case measured again in a
    later file (by name: speed-gpt2 after speed-gpt) replaces the earlier one. Peers (benchmarks/peer_anchors.py) from the same session."""
    rows = {}
    for part in sorted(folder.glob("speed-*.jsonl")):
        for row in json_lines(part):
            rows[(row["workload"], row["mode"], row["approach"])] = row
    peers = load_anchors(folder / "peer-anchors.jsonl")
    peer_methods = {"inference": (("peer: one torch.cuda.graph, bare replay", "manual_graph_ms"),
                                  ("peer: compile reduce-overhead, bare call", "compile_reduce_overhead_ms")),
                    "training": (("peer: whole-iteration graph", "full_iteration_graph_ms"),
                                 ("peer: make_graphed_callables", "make_graphed_callables_ms"))}
    out = ["| workload | mode | approach | verdict | eager ms | graphed ms | kernel floor ms | graphed / floor "
           "| graph kernels ms | speedup | capture s |", "|" + "---|" * 11]
    for (workload, mode, approach), row in rows.items():
        r = RecipeReport.from_json({k: v for k, v in row.items() if k not in ("workload", "approach", "verdict")})
        out.append(f"| {workload} | {mode} | {approach} | {row['verdict']} | {fmt(r.eager_ms)} | {fmt(r.graphed_ms)} "
                   f"| {fmt(r.kernel_floor_ms)} | {fmt(r.graphed_over_floor, 3)} | {fmt(r.graphed_kernel_ms)} "
                   f"| {fmt(r.speedup, 2)} | {fmt(r.capture_s, 1)} |")
    measured = {workload for workload, _, _ in rows}
    for (workload, mode), peer in sorted(peers.items()):
        for label, key in peer_methods.get(mode, ()) if workload in measured else ():
            if peer.get(key) and peer.get("kernel_floor_ms"):
                out.append(f"| {workload} | {mode} | {label} | - | {fmt(peer.get('eager_ms'))} | {fmt(peer[key])} "
                           f"| {fmt(peer['kernel_floor_ms'])} | {fmt(peer[key] / peer['kernel_floor_ms'], 3)} | - "
                           f"| {fmt(peer['eager_ms'] / peer[key], 2)} | - |")
    return out


def structures_table(path: Path) -> list[str]:
    """tests/gpu/test_structures_gpu.py: real models' inputs and outputs through every capturing workflow."""
    out = ["| workflow | mode | model <- inputs factory | options | verdict | output values | speedup | graphed / floor "
           "| note |", "|" + "---|" * 9]
    for case in json_lines(path):
        args, r = case["args"], RecipeReport.from_json(case["report"])
        value = {a: b for a, b in zip(args, args[1:], strict=False) if a.startswith("--")}
        model = value["--model"].split(":")[-1].removeprefix("build_") + " <- " + value["--inputs"].split(":")[-1]
        options = " ".join(f"{k} {v}" for k, v in value.items() if k in ("--dtype", "--amp"))
        note = " ".join((r.error or "").split())[:150]
        out.append(f"| {r.workflow} | {r.mode} | {model} | {options or '-'} | {r.unknown.get('verdict')} "
                   f"| {len(r.output_leaves) if r.output_leaves else '-'} | {fmt(r.speedup, 2)} "
                   f"| {fmt(r.graphed_over_floor, 3)} | {note or '-'} |")
    return out


def compile_hazards_table(path: Path) -> list[str]:
    """benchmarks/compile_hazards.py: each hazard of a compiled region, called 12 times."""
    rows = json_lines(path)
    out = [f"torch {rows[0]['torch']}, device {rows[0]['device']}; 12 calls per case.", "",
           "| case | rule | frames compiled | graph breaks | CUDA graphs recorded | cudagraph skips | error |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        error = (r["error"] or "").split(" Stack trace")[0]
        out.append(f"| {r['case']} | {r['rule']} | {r['frames_compiled']} | {r['graph_breaks']} | "
                   f"{r['cudagraphs_recorded'] if r['cudagraphs_recorded'] is not None else ''} | "
                   f"{r['cudagraph_skips'] if r['cudagraph_skips'] is not None else ''} | {error} |")
    return out


def _compact(value) -> str:
    """A measured value in a table cell: lists of rows as `key value` groups separated by `;`."""
    if isinstance(value, list):
        return "; ".join(_compact(v) for v in value)
    if isinstance(value, dict):
        return " ".join(f"{k} {_compact(v)}" for k, v in value.items())
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def skill_facts_table(path: Path) -> list[str]:
    """benchmarks/skill_facts_gpu.py: one row per fact, its measured values and the error it raised."""
    rows = json_lines(path)
    out = [f"torch {rows[0]['torch']}, device {rows[0]['device']}.", "",
           "| fact | ok | measured | error |", "|---|---|---|---|"]
    for r in rows:
        values = {k: v for k, v in r.items() if k not in ("fact", "ok", "error", "torch", "device")}
        measured = ", ".join(f"{k} {_compact(v)}" for k, v in values.items())
        error = (r.get("error") or "-").replace("|", "\\|")
        out.append(f"| {r['fact']} | {'yes' if r['ok'] else 'no'} | {measured or '-'} | {error} |")
    return out


def session_sections(folder: Path) -> list[str]:
    """The tables of a later GPU session (cgkit trace, smoke --baseline, optimizer facts, DDP scaling)."""
    machines = [json.loads(p.read_text()) for p in sorted(folder.glob("machine*.json"))]
    m = max(machines, key=lambda x: x["gpus"])
    date = folder.resolve().name.split("-", 1)[1] if "-" in folder.name else "?"
    lines = ["", f"# Session {date}: {m['gpu']} (x{m['gpus']}), torch {m['torch']}, CUDA {m['cuda']}, Python {m['python']}",
             "", f"Raw output: `{folder.resolve().relative_to(HERE.parent)}/`."]
    sections = [
        ("trace_rules_gpu.json", lambda p: trace_rules_table(folder / "check_rules_gpu.json", p),
         "cgkit trace on the GPU: each rule's Example, under real capture and under trace",
         "`tests/check/test_rules_gpu.py` runs each Example under real capture (failed = capture fails, wrong = replays "
         "wrong); `tests/gpu/test_trace_gpu.py` runs `cgkit trace --device cuda` on the same Example (the line it "
         "names) and on the Use instead (which must be clean)."),
        ("check_rules_gpu.json", lambda p: [] if (folder / "trace_rules_gpu.json").exists() else check_table(p),
         "cgkit check rules on the GPU: each rule's Example under real capture or compile",
         "`tests/check/test_rules_gpu.py`: the Example must fail capture or replay wrong (failed / wrong), the Use "
         "instead must capture and replay right (ok)."),
        ("compile-hazards.jsonl", compile_hazards_table, "What each compiled-region hazard does under reduce-overhead",
         "`benchmarks/compile_hazards.py --device cuda`: frames Dynamo compiled (8 = a recompile on every call until "
         "the recompile limit), graph breaks (distinct reasons), CUDA graphs recorded by cudagraph trees, skips, and "
         "what the run raised. The evidence for the severities of `cgkit check` in `torch.compile` regions."),
        ("capture-facts.jsonl", facts_table, "Manual-capture facts behind CG403, CG406, CG408, CG412 and CG603",
         "`benchmarks/capture_facts.py`."),
        ("trace-cost.jsonl", trace_cost_table, "What a trace costs",
         "`benchmarks/trace_cost.py`: one recorded call (both torch modes on, operators logged) against one eager "
         "call of the same step, interleaved in one process, medians of 15."),
        ("baseline-reports.jsonl", baseline_table, "cgkit smoke CANDIDATE --baseline ORIGINAL on hand-graphed scripts",
         "`tests/gpu/test_baseline_gpu.py` over `tests/gpu/baseline/`: 3 runs of each script, alternated; speed from "
         "the timings the scripts print."),
        ("facts.jsonl", facts_table, "Optimizer and schedule facts, measured; source facts of this torch",
         "`benchmarks/optimizer_facts.py` and `benchmarks/source_facts.py --json`."),
        ("structure-reports.jsonl", structures_table, "Real models' inputs and outputs through every recipe",
         "`tests/gpu/test_structures_gpu.py` (`scripts/gpu_suite.sh structures`, 7 cases at a time beside the recipe "
         "tests: speedups are lower bounds) over `tests/models/structures.py`: dict, dataclass and mapping-object "
         "outputs with nested tuples, lists and non-tensor values; keyword, (args, kwargs), token-id, mask and "
         "non-tensor inputs; bf16 parameters. The counting and argmax rows must fail, and say why."),
        ("skill-facts.jsonl", skill_facts_table, "Facts the skill's references state, measured on one GPU",
         "`benchmarks/skill_facts_gpu.py`: one row per fact (the first seven share one process, the others run in "
         "a process each). ok: the code ran without raising; for some facts the error is the measurement (a call "
         "refused during capture), and the script's docstrings say which. Values are copied as printed."),
        ("ddp-scaling.jsonl", ddp_table, "DDP recipes on one GPU and on two",
         "`benchmarks/ddp_scaling.py`: `cgkit smoke --workflow W --mode training --ddp --nproc N`, one run at a time, "
         "the machine to itself. samples/s = GPUs x batch / ms per step. The kernel floor under DDP includes the "
         "time NCCL's kernels wait for the other rank, so it differs between ranks and is not a floor there."),
    ]
    if list(folder.glob("speed-*.jsonl")):
        lines += ["", "## Every approach side by side: fused graphs, static I/O, the compiled optimizer step", "",
                  "`benchmarks/bench_speed.py --workload W` (one case at a time, the machine to itself); "
                  "`benchmarks/peer_anchors.py` right after, same session (peers time a bare replay or call: no "
                  "copies in or out). The kernel floor is the summed GPU time of eager's kernels; graphed / floor "
                  "below 1 is only possible with other (fused) kernels.", "", *speed_table(folder)]
    te_reports = sorted(folder.glob("recipe-reports-te*.jsonl"))
    if te_megatron_table(te_reports):
        day = re.search(r"\d{4}-\d{2}-\d{2}", folder.resolve().name)
        lines += ["", f"## Transformer Engine and Megatron-Core recipes, re-measured {day.group() if day else date}", "",
                  "`scripts/device_te_setup.sh 0 ... 4 && scripts/gpu_suite.sh te`: one case at a time, the machine to "
                  "itself, with today's harness (times first, profiles last). They replace the earlier rows, which "
                  "profiled before timing.", "", *te_megatron_table(te_reports), "", *te_sweep_table(te_reports)]
    for name, table, title, text in sections:
        if (folder / name).exists():
            rows = table(folder / name)
            if rows:
                lines += ["", f"## {title}", "", text, "", *rows]
    notes = folder / "NOTES.md"  # what the session's numbers say, written by hand beside them
    if notes.exists():
        lines += ["", notes.read_text().strip()]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the folder of one GPU session's output")
    parser.add_argument("--also", type=Path, action="append", default=[],
                        help="a recipe-reports*.jsonl from an earlier session to include (repeatable)")
    parser.add_argument("--session", type=Path, action="append", default=[],
                        help="a later session's folder (trace, baseline, facts, DDP tables); repeatable")
    args = parser.parse_args()
    run = args.run
    machine = json.loads((run / "machine.json").read_text())
    parts = sorted(run.glob("recipes-bench*.json"))
    bench = {"meta": json.loads(parts[0].read_text())["meta"], "rows": latest_rows(parts)}
    peers = load_anchors(run / "peer-anchors.jsonl")
    lines = [
        "# Benchmark results",
        "",
        f"Machine: {machine['gpu']} (x{machine['gpus']}), torch {machine['torch']}, CUDA {machine['cuda']}, "
        f"Python {machine['python']}. Date: {bench['meta']['date']}. Written by `benchmarks/write_results.py` "
        "from the output of `scripts/gpu_suite.sh` (see the end of this file for how to rerun).",
        "",
        "## Recipes: eager vs graphed vs the kernel-time floor",
        "",
        "Each row is one generated recipe run by `cgkit smoke` in its own process (`benchmarks/bench_recipes.py`),",
        "one after another. eager and graphed are median ms per step (CUDA events); graphed is the whole call a user",
        "makes (copy the inputs in, replay, clone the outputs out; for training, the whole step). The kernel floor is",
        "the summed GPU time of the eager step's kernels (torch.profiler), which no replay can beat.",
        "`replay-only ms` (inference) times the graph without the recipe's copies in and out, the way the peer does.",
        "`peer ms` is the same workload and API measured by the anchors' own script (`benchmarks/peer_anchors.py`:",
        "bare replay or compiled call, no copy-in or clone-out) minutes later on the same machine;",
        "`anchor ms` is that script's earlier run (`benchmarks/anchors-h200-2026-11-29.jsonl`).",
        "The anchor workloads (mlp16x512_b8, gpt6x512_b1s64) run with TF32 matmuls on, as the anchors did.",
        "",
        *bench_table(bench["rows"], load_anchors(), peers),
    ]
    experiments = [
        ("compile-call-cost.jsonl", compile_call_table, "compile: the recipe's call against the peer's, in one process",
         "`benchmarks/compile_call_cost.py`: the same compiled model called three ways, round after round in one "
         "process, no profiler before (median of 5 rounds of 5 x 200 calls)."),
        ("profiler-effect.jsonl", profiler_effect_table, "What a torch.profiler session does to the timings after it",
         "`benchmarks/profiler_effect.py`, one row per process (`scripts/gpu_suite.sh experiments` runs three): the demo "
         "model eager and as one graph replay, timed before and after one profiler session in the same process."),
        ("compile-kernels.jsonl", compile_kernels_table, "compile on the demo: which kernels, and the BLAS choice",
         "`benchmarks/compile_kernels.py`: the demo model (fp32, TF32 off) in four forms, under PyTorch's default BLAS "
         "choice and with `torch.backends.cuda.preferred_blas_library(\"cublaslt\")`; wall time first, then the "
         "profiler."),
    ]
    for name, table, title, text in experiments:
        if (run / name).exists():
            lines += ["", f"## {title}", "", text, "", *table(run / name)]
    cases = sorted(run.glob("recipe-reports*.jsonl"))
    if cases:
        lines += ["", "## Every smoke test case (tests/gpu)", "",
                  "`scripts/gpu_suite.sh tests` runs these 8 at a time on the one GPU, so their speedups are lower",
                  "bounds; the tables above and below are the clean measurements.", "", *cases_table(cases)]
    cases += args.also
    earlier = f" From `{'`, `'.join(str(p) for p in args.also)}` (an earlier session)." if args.also else ""
    te_megatron = te_megatron_table(cases)
    if te_megatron:
        lines += ["", "## Transformer Engine and Megatron-Core recipes", "",
                  "Run one at a time (`scripts/gpu_suite.sh te`); eager and graphed are one training step (all its",
                  "microbatches); steps compared: per-step losses, graphed vs eager, from the same initial weights." + earlier,
                  "", *te_megatron]
    sweep = te_sweep_table(cases)
    if sweep:
        lines += ["", "## Transformer Engine: where graphs pay (size sweep in the `te` recipe)", "",
                  "Six `te.TransformerLayer`s, one training step, eager vs graphed vs the kernel-time floor." + earlier,
                  "", *sweep]
    check = run / "check_rules_gpu.json"
    if check.exists():
        lines += ["", "## cgkit check: each rule's Example and Use instead under real capture", "",
                  "`tests/check/test_rules_gpu.py`: the Example must fail capture or replay wrong; the Use instead",
                  "must capture and replay right.", "", *check_table(check)]
    extra = HERE / "RESULTS-extra.md"
    if extra.exists():
        lines += ["", extra.read_text().strip()]
    for folder in args.session:
        lines += session_sections(folder)
    (HERE / "RESULTS.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {HERE / 'RESULTS.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
