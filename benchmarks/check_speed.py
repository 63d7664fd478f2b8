"""How fast is `cgkit check`? Side by side with bare `ast.parse`, ruff and TorchFix, same files, same run.

Trees: torch's ``nn``, ``optim`` and ``cuda`` packages (about 72k lines), and the whole installed
torch package. cgkit runs through its Python API (the full pipeline: read, parse, regions, calls
followed across files, rules, noqa), in-process like ``ast.parse``; ruff and TorchFix run as
subprocesses. The bar: cgkit takes at most 3x the time of ``ast.parse`` alone on the 72k-line tree.

    python benchmarks/check_speed.py                 # writes benchmarks/CHECK_SPEED.md
    python benchmarks/check_speed.py --torchfix-all  # also TorchFix on all of torch (slow: minutes)

TorchFix is timed when its ``torchfix`` command is installed (``pip install torchfix``).
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import gc
import importlib.util
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cgkit.check import check_paths  # noqa: E402
from cgkit.check.config import Config  # noqa: E402

RATIO_BAR = 3.0


def torch_root() -> str:
    spec = importlib.util.find_spec("torch")  # located, not imported
    if spec is None or not spec.submodule_search_locations:
        sys.exit("torch is not installed: nothing to measure")
    return list(spec.submodule_search_locations)[0]


def python_files(paths: list[str]) -> list[str]:
    out = []
    for p in paths:
        for root, dirs, files in os.walk(p):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            out.extend(os.path.join(root, f) for f in sorted(files) if f.endswith(".py"))
    return out


def count_lines(files: list[str]) -> int:
    total = 0
    for f in files:
        with open(f, "rb") as fh:
            total += fh.read().count(b"\n")
    return total


def time_ast_parse(files: list[str]) -> float:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for f in files:
            with open(f, "rb") as fh:
                data = fh.read()
            try:
                ast.parse(data)
            except (SyntaxError, ValueError):
                pass
    return time.perf_counter() - start


def time_cgkit(paths: list[str]) -> tuple[float, int, int]:
    gc.collect()
    start = time.perf_counter()
    result = check_paths(paths, config=Config())
    elapsed = time.perf_counter() - start
    return elapsed, len(result.findings), len(result.errors)


def time_cmd(cmd: list[str], timeout: float | None = None) -> float | None:
    start = time.perf_counter()
    try:
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return time.perf_counter() - start


def median(fn, repeat: int):
    values = [fn() for _ in range(repeat)]
    if any(v is None for v in values):
        return None
    return statistics.median(values)


def tool_version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    except OSError:
        return "not installed"
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else "?"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def torch_version(root: str) -> str:
    version_file = os.path.join(root, "version.py")
    try:
        with open(version_file, encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("__version__"):
                    return line.split("=", 1)[1].strip().strip("'\"")
    except OSError:
        pass
    return "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per fast measurement (median)")
    parser.add_argument("--torchfix-all", action="store_true", help="also run TorchFix on all of torch")
    parser.add_argument("-o", "--output", default=str(ROOT / "benchmarks" / "CHECK_SPEED.md"))
    args = parser.parse_args()

    root = torch_root()
    trees = {
        "torch nn+optim+cuda": [os.path.join(root, d) for d in ("nn", "optim", "cuda")],
        "torch (whole package)": [root],
    }
    ruff = shutil.which("ruff")
    torchfix = shutil.which("torchfix")
    rows = []
    for label, paths in trees.items():
        files = python_files(paths)
        lines = count_lines(files)
        print(f"{label}: {len(files)} files, {lines} lines", flush=True)
        repeat = args.repeat if lines < 200_000 else 1
        t_ast = median(lambda files=files: time_ast_parse(files), repeat)
        runs = [time_cgkit(paths) for _ in range(repeat)]
        t_cg = statistics.median(r[0] for r in runs)
        findings, errors = runs[0][1], runs[0][2]
        t_ruff = (
            median(lambda paths=paths: time_cmd([ruff, "check", "--isolated", "--no-cache", "--exit-zero", "--quiet", *paths]), repeat)
            if ruff
            else None
        )
        t_tf = None
        tf_note = "not installed"
        if torchfix and (lines < 200_000 or args.torchfix_all):
            t_tf = time_cmd([torchfix, *paths], timeout=3600)
            tf_note = "" if t_tf is not None else "failed or timed out"
        elif torchfix:
            tf_note = "skipped (minutes on this tree; run with --torchfix-all)"
        rows.append(
            {
                "tree": label,
                "files": len(files),
                "lines": lines,
                "ast": t_ast,
                "cgkit": t_cg,
                "ruff": t_ruff,
                "torchfix": t_tf,
                "torchfix_note": tf_note,
                "findings": findings,
                "errors": errors,
            }
        )
        print(f"  ast.parse {t_ast:.2f}s  cgkit {t_cg:.2f}s ({t_cg / t_ast:.2f}x)  ruff {t_ruff}  torchfix {t_tf}", flush=True)

    write_report(args.output, root, rows, ruff, torchfix)
    first = rows[0]
    ratio = first["cgkit"] / first["ast"]
    print(f"wrote {args.output}; cgkit/ast.parse on {first['tree']}: {ratio:.2f}x (bar {RATIO_BAR}x)")
    if ratio > RATIO_BAR or any(r["errors"] for r in rows):
        sys.exit(1)


def _fmt_t(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def _fmt_rate(lines: int, value) -> str:
    return "-" if not value else f"{lines / value:,.0f}"


def _fmt_ratio(value, base) -> str:
    return "-" if value is None or not base else f"{value / base:.2f}x"


def write_report(path: str, root: str, rows: list[dict], ruff: str | None, torchfix: str | None) -> None:
    lines = [
        "# `cgkit check` speed",
        "",
        "Generated by `python benchmarks/check_speed.py`; numbers from one run on the machine below.",
        "",
        f"- Date: {dt.date.today().isoformat()}",
        f"- Machine: {cpu_model()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}",
        f"- Python {platform.python_version()}, torch {torch_version(root)} (source tree checked: the installed `torch` package)",
        f"- ruff: {tool_version([ruff, '--version']) if ruff else 'not installed'}",
        f"- TorchFix: {tool_version([torchfix, '--version']) if torchfix else 'not installed'}",
        "",
        "cgkit and `ast.parse` run in-process (read + parse every file; cgkit also finds regions, follows",
        "calls across files, runs the rules and applies noqa). ruff (`ruff check --isolated --no-cache`,",
        "default rules, multi-threaded) and TorchFix (its default rules) run as subprocesses, so their times",
        "include interpreter/process start-up. Fast tools: median of 3 runs on the small tree.",
        "",
        "| tree | files | lines | tool | seconds | lines/s | vs ast.parse |",
        "|---|---:|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        for tool, key in (("ast.parse", "ast"), ("cgkit check", "cgkit"), ("ruff", "ruff"), ("TorchFix", "torchfix")):
            value = r[key]
            note = ""
            if key == "torchfix" and value is None:
                note = f" ({r['torchfix_note']})"
            lines.append(
                f"| {r['tree']} | {r['files']} | {r['lines']:,} | {tool}{note} | {_fmt_t(value)} | "
                f"{_fmt_rate(r['lines'], value)} | {_fmt_ratio(value, r['ast'])} |"
            )
    lines += [
        "",
        "cgkit findings / internal errors: "
        + "; ".join(f"{r['tree']}: {r['findings']} / {r['errors']}" for r in rows),
        "",
        f"Bar: cgkit at most {RATIO_BAR:.0f}x `ast.parse` on the nn+optim+cuda tree "
        f"(measured {rows[0]['cgkit'] / rows[0]['ast']:.2f}x).",
        "",
    ]
    Path(path).write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    main()
