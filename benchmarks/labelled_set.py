"""Score `cgkit check` on a labelled set of scripts: recall by category, precision, false alarms on
clean look-alike lines.

A labelled set is a folder of Python files whose lines carry trailing labels:

* ``# HAZARD: <category>``: a real hazard on this line, of one of cgkit's categories
  (host-sync, host-code, dynamic-control-flow, dynamic-shape, python-scalar, static-address, rng,
  pinned-memory, stream, optimizer, autocast-cache, api-misuse);
* ``# CLEAN: <why>``: a line that looks like a hazard and is not.

Each file is checked on its own (as a user runs `cgkit check script.py`). A hazard counts as found
when an error or warning is reported on its line with the same category ("found, other category" when
only another category is); an error or warning on a CLEAN line is a false alarm; one on an unlabelled
line is listed for review (precision counts it against cgkit until a reader labels the line). For
precision, an error or warning on a hazard line is no false alarm whatever its category.

    python benchmarks/labelled_set.py FOLDER [--adjudicated VERDICTS.json] [--out REPORT.md] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cgkit.check import check_paths  # noqa: E402
from cgkit.check.model import CATEGORIES  # noqa: E402

_LABEL = re.compile(r"#\s*(HAZARD|CLEAN)\s*:\s*([\w-]+)?")


def labels_of(path: Path) -> dict[int, tuple[str, str]]:
    """line -> ("HAZARD", category) or ("CLEAN", "")."""
    out = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        match = _LABEL.search(line)
        if match:
            kind = match.group(1)
            out[number] = (kind, (match.group(2) or "").strip() if kind == "HAZARD" else "")
    return out


def score(folder: Path, adjudicated: list[dict] | None = None) -> dict:
    """``adjudicated``: verdicts on findings at unlabelled lines (``{"file", "line", "verdict": "true" |
    "false", "why"}``), read after the fact; a true one counts as a hazard found, outside recall."""
    reviewed = {(a["file"], a["line"]): a for a in adjudicated or []}
    rows = []
    for path in sorted(folder.rglob("*.py")):
        labels = labels_of(path)
        result = check_paths([str(path)], use_config=False)
        found: dict[int, list] = {}
        for f in result.findings:
            if f.severity in ("error", "warning"):
                found.setdefault(f.line, []).append(f)
        for line, (kind, category) in labels.items():
            hits = found.get(line, [])
            if kind == "HAZARD":
                same = [f for f in hits if f.category == category]
                status = "found" if same else ("other category" if hits else "missed")
                rows.append({"file": path.name, "line": line, "label": category, "status": status,
                             "codes": sorted({f.code for f in hits})})
            else:
                rows.append({"file": path.name, "line": line, "label": "CLEAN",
                             "status": "false alarm" if hits else "quiet", "codes": sorted({f.code for f in hits})})
        for line, hits in found.items():
            if line not in labels:
                verdict = reviewed.get((path.name, line))
                status = f"reviewed {verdict['verdict']}" if verdict else "review"
                rows.append({"file": path.name, "line": line, "label": "unlabelled", "status": status,
                             "codes": sorted({f.code for f in hits}), "why": verdict["why"] if verdict else ""})
    hazards = [r for r in rows if r["label"] not in ("CLEAN", "unlabelled")]
    found_rows = [r for r in hazards if r["status"] == "found"]
    flagged_lines = [r for r in rows if r["codes"]]
    true_lines = [r for r in flagged_lines if r["label"] not in ("CLEAN", "unlabelled") or r["status"] == "reviewed true"]
    by_category = {}
    for cat in CATEGORIES:
        of_cat = [r for r in hazards if r["label"] == cat]
        if of_cat:
            by_category[cat] = (sum(r["status"] == "found" for r in of_cat), len(of_cat))
    return {
        "rows": rows,
        "hazards": len(hazards),
        "found": len(found_rows),
        "other_category": sum(r["status"] == "other category" for r in hazards),
        "recall": len(found_rows) / len(hazards) if hazards else None,
        "flagged_lines": len(flagged_lines),
        "precision": len(true_lines) / len(flagged_lines) if flagged_lines else None,
        "clean": sum(r["label"] == "CLEAN" for r in rows),
        "false_alarms_on_clean": sum(r["status"] == "false alarm" for r in rows),
        "unlabelled_findings": sum(r["status"] == "review" for r in rows),
        "reviewed_true": sum(r["status"] == "reviewed true" for r in rows),
        "reviewed_false": sum(r["status"] == "reviewed false" for r in rows),
        "by_category": by_category,
        "unknown_labels": sorted({r["label"] for r in hazards} - set(CATEGORIES)),
    }


def render(folder: Path, s: dict) -> str:
    pct = lambda x: "n/a" if x is None else f"{100 * x:.0f}%"  # noqa: E731
    out = [f"# cgkit check on the labelled set `{folder}`", "",
           f"- hazards: {s['hazards']}, found with the right category: {s['found']} (**recall {pct(s['recall'])}**), "
           f"found under another category: {s['other_category']}",
           f"- lines with an error or warning: {s['flagged_lines']}, on a labelled hazard: "
           f"**precision {pct(s['precision'])}**",
           f"- clean look-alike lines: {s['clean']}, false alarms on them: {s['false_alarms_on_clean']}",
           f"- findings on unlabelled lines: {s['reviewed_true']} read and true, {s['reviewed_false']} read and false, "
           f"{s['unlabelled_findings']} not read yet (counted against precision)", "",
           "| category | found | hazards |", "| --- | ---: | ---: |"]
    for cat, (found, total) in s["by_category"].items():
        out.append(f"| {cat} | {found} | {total} |")
    if s["unknown_labels"]:
        out += ["", f"Labels that are no cgkit category: {', '.join(s['unknown_labels'])}"]
    out += ["", "## Not found, other category, false alarms, unlabelled", "", "| file | line | label | status | codes | note |",
            "| --- | ---: | --- | --- | --- | --- |"]
    for r in s["rows"]:
        if r["status"] not in ("found", "quiet"):
            out.append(f"| {r['file']} | {r['line']} | {r['label']} | {r['status']} | {' '.join(r['codes'])} | {r.get('why', '')} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--out", type=Path, help="write the report here (default: print it)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--adjudicated", type=Path, help="verdicts on findings at unlabelled lines (JSON list)")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        print(f"no such folder: {args.folder}", file=sys.stderr)
        return 2
    adjudicated = json.loads(args.adjudicated.read_text(encoding="utf-8")) if args.adjudicated else None
    s = score(args.folder, adjudicated)
    text = render(args.folder, s)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    else:
        print(text)
    if args.json:
        args.json.write_text(json.dumps(s, indent=1), encoding="utf-8")
    print(f"recall {s['found']}/{s['hazards']}, precision {s['precision']}, false alarms on clean lines "
          f"{s['false_alarms_on_clean']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
