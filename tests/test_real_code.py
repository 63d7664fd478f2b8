"""benchmarks/real_code.py: the real-code precision table's machinery (CPU only, on a tiny project)."""

from __future__ import annotations

import importlib.util
import json
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("real_code", ROOT / "benchmarks" / "real_code.py")
real_code = importlib.util.module_from_spec(spec)
spec.loader.exec_module(real_code)

PROJECT = textwrap.dedent('''
    import torch


    def inner(t):
        """A helper the capture reaches."""
        return t * 2


    def outer(t):
        return inner(t) + 1


    x = torch.randn(8, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = outer(x)
''').lstrip()


def _project(tmp_path) -> Path:
    project = tmp_path / "root" / "tiny"
    project.mkdir(parents=True)
    (project / "main.py").write_text(PROJECT, encoding="utf-8")
    return tmp_path / "root"


def test_an_injected_sync_is_found_with_its_chain(tmp_path):
    root = _project(tmp_path)
    case = {"project": "tiny", "file": "main.py", "function": "inner", "code": "torch.cuda.synchronize()", "expect": "CG104"}
    result = real_code.inject(root, case)
    assert result["found"] and result["line"] == 6  # after the docstring
    assert result["chain"] == "with torch.cuda.graph(g) at L16 -> outer() L10 -> inner() L4"
    assert "synchronize" not in (root / "tiny" / "main.py").read_text()  # the project itself is untouched


def test_a_sync_outside_any_capture_is_not_found(tmp_path):
    root = _project(tmp_path)
    (root / "tiny" / "main.py").write_text(PROJECT + "\n\ndef unused(t):\n    return t\n", encoding="utf-8")
    case = {"project": "tiny", "file": "main.py", "function": "unused", "code": "torch.cuda.synchronize()", "expect": "CG104"}
    assert not real_code.inject(root, case)["found"]


def test_findings_get_their_verdicts_and_the_rest_are_unlabelled(tmp_path):
    root = _project(tmp_path)
    (root / "tiny" / "main.py").write_text(PROJECT + "    z = y.sum().item()\n", encoding="utf-8")
    run = real_code.run_project(root, "tiny")
    assert run["capture_sites"] == 1 and run["functions_followed"] == 3
    assert [(f["line"], f["code"]) for f in run["findings"]] == [(17, "CG101")]
    real_code.judge(run["findings"], [{"project": "tiny", "path": "main.py", "line": 17, "code": "CG101",
                                       "verdict": "true", "why": "a sync"}])
    assert run["findings"][0]["verdict"] == "true"
    real_code.judge(run["findings"], [])
    assert run["findings"][0]["verdict"] == "unlabelled"
    text = real_code.render([{"name": "tiny", "version": "1"}], [run], [])
    assert "| tiny | 1 | 1 | 1 | 3 |" in text and "unlabelled" in text


def test_missing_projects_are_a_clear_error(tmp_path, capsys):
    assert real_code.main(["--root", str(tmp_path), "--out", str(tmp_path / "out.md")]) == 2
    assert "missing under" in capsys.readouterr().err


def test_every_verdict_and_injection_names_a_project_of_the_manifest():
    data = ROOT / "benchmarks" / "real_code"
    names = {p["name"] for p in json.loads((data / "projects.json").read_text())}
    for entry in json.loads((data / "verdicts.json").read_text()):
        assert entry["project"] in names and entry["verdict"] in ("true", "false") and entry["why"]
    for case in json.loads((data / "injections.json").read_text()):
        assert case["project"] in names and case["expect"].startswith("CG")
