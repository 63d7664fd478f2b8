"""benchmarks/labelled_set.py: scoring cgkit check against a labelled folder (CPU only)."""

from __future__ import annotations

import importlib.util
import json
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("labelled_set", ROOT / "benchmarks" / "labelled_set.py")
labelled_set = importlib.util.module_from_spec(spec)
spec.loader.exec_module(labelled_set)

SCRIPT = textwrap.dedent('''
    import torch

    x = torch.randn(8, device="cuda")
    fmt = "thd"
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        n = x.sum().item()  # HAZARD: host-sync
        if fmt == "thd":  # CLEAN: a string
            y = x * 2
        z = x[x > 0]  # HAZARD: host-sync
        w = torch.cuda.synchronize()
        v = x.nonzero()  # HAZARD: dynamic-shape
    m = x.max().item()  # CLEAN: outside the region
''').lstrip()


def test_recall_precision_and_categories(tmp_path):
    (tmp_path / "case.py").write_text(SCRIPT, encoding="utf-8")
    s = labelled_set.score(tmp_path)
    statuses = {(r["line"], r["status"]) for r in s["rows"]}
    assert (7, "found") in statuses and (12, "found") in statuses
    assert (10, "other category") in statuses  # a boolean mask is dynamic-shape, not host-sync
    assert (8, "quiet") in statuses and (13, "quiet") in statuses
    assert (11, "review") in statuses  # an unlabelled finding, counted against precision until read
    assert s["hazards"] == 3 and s["found"] == 2 and s["false_alarms_on_clean"] == 0
    assert s["precision"] == 3 / 4  # a hazard under another category is still no false alarm


def test_adjudicated_findings_count_as_true(tmp_path):
    (tmp_path / "case.py").write_text(SCRIPT, encoding="utf-8")
    verdicts = [{"file": "case.py", "line": 11, "verdict": "true", "why": "a sync"}]
    s = labelled_set.score(tmp_path, verdicts)
    assert s["reviewed_true"] == 1 and s["unlabelled_findings"] == 0
    assert s["precision"] == 1.0
    out = tmp_path / "report.md"
    assert labelled_set.main([str(tmp_path), "--out", str(out), "--adjudicated", str(_write(tmp_path, verdicts))]) == 0
    assert "recall 67%" in out.read_text()


def test_a_missing_folder_is_a_clear_error(tmp_path, capsys):
    assert labelled_set.main([str(tmp_path / "nope")]) == 2
    assert "no such folder" in capsys.readouterr().err


def _write(tmp_path, data) -> Path:
    path = tmp_path / "verdicts.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path
