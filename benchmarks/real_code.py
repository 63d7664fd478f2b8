"""`cgkit check` on public projects that use CUDA graphs or reduce-overhead: precision and reach.

For each project of benchmarks/real_code/projects.json (a copy under ROOT/<name>, pinned to the
version the manifest names), this runs `cgkit check` and counts the capture sites it found (regions
other than candidates), the functions it followed from them, the time, and every error and warning.
Each of those is matched with its verdict in benchmarks/real_code/verdicts.json (true or false
positive, and why, from reading the code); a finding with no verdict is listed as unlabelled, so a
change to the checker that adds findings shows up here until someone reads them.

`--inject` checks reach: for each case of benchmarks/real_code/injections.json it copies the
project, inserts one host sync as the first statement of a function the capture reaches, and
checks that `cgkit check` reports it at that line with the chain of calls from the capture.

    python benchmarks/real_code.py --root /tmp/proj [--inject] [--out benchmarks/real_code/REAL_CODE.md]

The projects are not part of this repository: fetch them at the versions of the manifest (the
`fetch` tool of this workplace, or the PyPI wheels it names) into ROOT first. real_code/subsets/SOURCES.md
says where each came from, and `<name>.txt` there lists the files of the projects checked as a subset.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "real_code"
sys.path.insert(0, str(HERE.parent))

from cgkit.check import check_paths  # noqa: E402


def load(name: str):
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def run_project(root: Path, name: str) -> dict:
    path = root / name
    start = time.perf_counter()
    result = check_paths([str(path)], use_config=False)
    seconds = time.perf_counter() - start
    sites = [r for r in result.regions if r["kind"] != "candidate"]
    findings = []
    for f in result.findings:
        if f.severity in ("error", "warning"):
            rel = os.path.relpath(f.path, path)
            findings.append({"project": name, "path": rel, "line": f.line, "code": f.code, "severity": f.severity,
                             "message": f.message, "chain": f.chain_text(), "source": _source_line(f.path, f.line)})
    return {
        "project": name, "files": result.files, "seconds": round(seconds, 2), "errors": result.errors,
        "capture_sites": len(sites), "functions_followed": sum(r["functions_followed"] for r in sites),
        "sites": [{"kind": r["kind"], "path": os.path.relpath(r["path"], path), "line": r["line"],
                   "functions_followed": r["functions_followed"]} for r in sites],
        "findings": findings,
    }


def _source_line(path: str, line: int) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace").splitlines()[line - 1].strip()
    except (OSError, IndexError):
        return ""


def judge(findings: list[dict], verdicts: list[dict]) -> None:
    index = {(v["project"], v["path"], v["line"], v["code"]): v for v in verdicts}
    for f in findings:
        v = index.get((f["project"], f["path"], f["line"], f["code"]))
        f["verdict"] = v["verdict"] if v else "unlabelled"
        f["why"] = v["why"] if v else ""


# -- reach: a sync injected into captured code ----------------------------------------------------
def inject(root: Path, case: dict) -> dict:
    """Copy the project, insert ``case["code"]`` as the first statement of ``case["function"]`` in
    ``case["file"]``, and look for ``case["expect"]`` at that line."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / case["project"]
        shutil.copytree(root / case["project"], copy, ignore=shutil.ignore_patterns("*.so", "*.cu", "*.cpp", ".git"))
        target = copy / case["file"]
        line = _insert(target, case["function"], case["code"])
        result = check_paths([str(copy)], use_config=False)
        hits = [f for f in result.findings if os.path.samefile(f.path, target) and f.line == line
                and f.code == case["expect"]]
        return {**case, "line": line, "found": bool(hits), "severity": hits[0].severity if hits else None,
                "chain": hits[0].chain_text() if hits else "",
                "other_codes_at_line": sorted({f.code for f in result.findings if os.path.samefile(f.path, target)
                                               and f.line == line} - {case["expect"]})}


def _insert(path: Path, qualname: str, code: str) -> int:
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    node = _find(tree, qualname.split("."))
    if node is None:
        raise SystemExit(f"{path}: no function {qualname}")
    body = node.body
    first = body[1] if len(body) > 1 and _is_docstring(body[0]) else body[0]
    lines = text.splitlines(keepends=True)
    indent = " " * first.col_offset
    lines.insert(first.lineno - 1, f"{indent}{code}  # injected by benchmarks/real_code.py\n")
    path.write_text("".join(lines), encoding="utf-8")
    return first.lineno


def _find(tree, parts):
    nodes = [tree]
    for part in parts:
        found = None
        for parent in nodes:
            for child in ast.walk(parent):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and child.name == part:
                    found = child
                    break
            if found:
                break
        if found is None:
            return None
        nodes = [found]
    return nodes[0] if isinstance(nodes[0], (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _is_docstring(stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


# -- the report -------------------------------------------------------------------------------------
def render(projects: list[dict], runs: list[dict], injections: list[dict]) -> str:
    manifest = {p["name"]: p for p in projects}
    out = ["# cgkit check on public projects: precision and reach", "",
           "Generated by `python benchmarks/real_code.py --root ROOT --inject` from "
           "`benchmarks/real_code/projects.json` (what was checked, at which version), "
           "`verdicts.json` (a verdict for every error and warning, from reading the code) and "
           "`injections.json`. Do not edit by hand.", ""]
    total = {"files": 0, "sites": 0, "followed": 0, "found": 0, "true": 0, "false": 0, "unlabelled": 0, "seconds": 0.0}
    out += ["| project | version | files | capture sites | functions followed | time (s) | errors + warnings | true | false | unlabelled |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for run in runs:
        f = run["findings"]
        counts = {k: sum(1 for x in f if x["verdict"] == k) for k in ("true", "false", "unlabelled")}
        out.append(f"| {run['project']} | {manifest[run['project']]['version']} | {run['files']} | {run['capture_sites']} | "
                   f"{run['functions_followed']} | {run['seconds']:.1f} | {len(f)} | {counts['true']} | {counts['false']} | "
                   f"{counts['unlabelled']} |")
        total["files"] += run["files"]
        total["sites"] += run["capture_sites"]
        total["followed"] += run["functions_followed"]
        total["found"] += len(f)
        total["seconds"] += run["seconds"]
        for k in ("true", "false", "unlabelled"):
            total[k] += counts[k]
    judged = total["true"] + total["false"]
    precision = f"{100 * total['true'] / judged:.0f}%" if judged else "n/a"
    out.append(f"| **all {len(runs)}** | | {total['files']} | {total['sites']} | {total['followed']} | {total['seconds']:.1f} | "
               f"{total['found']} | {total['true']} | {total['false']} | {total['unlabelled']} |")
    out += ["", f"Precision: **{precision}** ({total['true']} true of {judged} judged errors and warnings)."
            + (f" {total['unlabelled']} finding(s) have no verdict yet." if total["unlabelled"] else ""), ""]
    errors = [e for run in runs for e in run["errors"]]
    if errors:
        out += ["Internal errors:", "", *[f"- {e}" for e in errors], ""]
    out += ["## Every error and warning", "", "| project | where | rule | verdict | why |", "| --- | --- | --- | --- | --- |"]
    for run in runs:
        for f in run["findings"]:
            where = f"`{f['path']}:{f['line']}` `{f['source'][:70]}`"
            out.append(f"| {f['project']} | {where} | {f['code']} {f['severity']} | {f['verdict']} | {f['why']} |")
    if injections:
        out += ["", "## Reach: a host sync injected into code a capture reaches", "",
                "Each case copies the project, inserts the line as the first statement of the function, and runs "
                "`cgkit check` on the copy.", "",
                "| project | injected into | line | expected | found | chain from the capture |", "| --- | --- | --- | --- | --- | --- |"]
        for case in injections:
            found = f"yes ({case['severity']})" if case["found"] else "**no**"
            out.append(f"| {case['project']} | `{case['file']}` `{case['function']}`: `{case['code']}` | {case['line']} | "
                       f"{case['expect']} | {found} | {case['chain']} |")
    out += ["", "## Capture sites found", ""]
    for run in runs:
        sites = ", ".join(f"`{s['path']}:{s['line']}` ({s['kind']}, {s['functions_followed']})" for s in run["sites"])
        out.append(f"- **{run['project']}**: {sites or 'none'}")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="/tmp/proj", help="folder holding one copy of each project, by name")
    parser.add_argument("--inject", action="store_true", help="also run the injection cases")
    parser.add_argument("--out", default=str(DATA / "REAL_CODE.md"))
    parser.add_argument("--json", help="also write the raw results here")
    args = parser.parse_args(argv)
    root = Path(args.root)
    projects = load("projects.json")
    missing = [p["name"] for p in projects if not (root / p["name"]).is_dir()]
    if missing:
        print(f"missing under {root}: {', '.join(missing)} (fetch them at the manifest's versions)", file=sys.stderr)
        return 2
    runs = []
    for p in projects:
        run = run_project(root, p["name"])
        judge(run["findings"], load("verdicts.json"))
        runs.append(run)
        print(f"{p['name']}: {run['capture_sites']} capture sites, {run['functions_followed']} functions followed, "
              f"{len(run['findings'])} errors and warnings, {run['seconds']:.1f} s", file=sys.stderr)
    injections = [inject(root, case) for case in load("injections.json")] if args.inject else []
    Path(args.out).write_text(render(projects, runs, injections), encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": runs, "injections": injections}, indent=1), encoding="utf-8")
    unlabelled = sum(1 for r in runs for f in r["findings"] if f["verdict"] == "unlabelled")
    missed = sum(1 for c in injections if not c["found"])
    return 1 if unlabelled or missed else 0


if __name__ == "__main__":
    sys.exit(main())
