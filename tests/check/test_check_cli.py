import json
import os

from click.testing import CliRunner

from cgkit.check import RULES
from cgkit.cli import main

SRC = """import torch
x = torch.randn(8, device="cuda")
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    a = x.sum().item()
"""
CLEAN = "import torch\nprint(torch.ones(2).sum().item())\n"


def _run(args, cwd):
    """`cgkit ARGS` run in `cwd`, where bad.py and clean.py are written first."""
    for name, text in (("bad.py", SRC), ("clean.py", CLEAN)):
        (cwd / name).write_text(text, encoding="utf-8")
    previous = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, args)
    finally:
        os.chdir(previous)


def test_exit_codes(tmp_path):
    assert _run(["check", "clean.py"], tmp_path).exit_code == 0
    result = _run(["check", "bad.py"], tmp_path)
    assert result.exit_code == 1
    assert "bad.py:5:9: CG101 [error]" in result.output
    assert _run(["check", "bad.py", "--exit-zero"], tmp_path).exit_code == 0
    assert _run(["check", "bad.py", "--select", "CG2"], tmp_path).exit_code == 0
    assert _run(["check", "bad.py", "--ignore", "CG101"], tmp_path).exit_code == 0


def test_usage_errors_exit_2(tmp_path):
    assert _run(["check", "--bogus"], tmp_path).exit_code == 2
    assert _run(["check", "bad.py", "--select", "XYZ9"], tmp_path).exit_code == 2
    assert _run(["check", "bad.py", "--format", "xml"], tmp_path).exit_code == 2
    assert _run(["rule", "CG999"], tmp_path).exit_code == 2


def test_no_paths_checks_the_current_directory(tmp_path):
    result = _run(["check"], tmp_path)
    assert result.exit_code == 1
    assert "bad.py:5:9: CG101" in result.output


def test_a_missing_path_is_a_usage_error_not_a_finding(tmp_path):
    result = _run(["check", "nope.py", "clean.py"], tmp_path)
    assert result.exit_code == 2
    assert "'nope.py' does not exist" in result.output
    assert "CG902" not in result.output


def test_a_file_that_is_not_python_is_a_usage_error(tmp_path):
    (tmp_path / "README.md").write_text("# Title\n\nIt's prose, not Python.\n")
    result = _run(["check", "README.md"], tmp_path)
    assert result.exit_code == 2
    assert "README.md: not a Python file or notebook" in result.output
    assert "CG901" not in result.output
    (tmp_path / "train").write_text("#!/usr/bin/env python3\n" + SRC)  # a script without a suffix is Python
    assert "CG101" in _run(["check", "train"], tmp_path).output


def test_nothing_to_check_is_said_and_is_not_all_clear(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.md").write_text("no Python here\n")
    for folder in ("empty", "docs"):
        result = _run(["check", folder], tmp_path)
        assert result.exit_code == 2, result.output
        assert "nothing was checked: no Python files" in result.output
        assert "All clear" not in result.output


def test_json_output(tmp_path):
    result = _run(["check", "bad.py", "--format", "json"], tmp_path)
    data = json.loads(result.output)
    assert [f["code"] for f in data["findings"]] == ["CG101"]


def test_rules_and_rule(tmp_path):
    result = _run(["rules"], tmp_path)
    assert result.exit_code == 0
    header, *rows = result.output.strip().splitlines()
    assert header.split("  ")[0] == "code" and "manual capture" in header and header.endswith("torch.compile")
    assert len(rows) == len(RULES)
    assert rows[0].index("error") == header.index("manual capture")  # the severity columns line up
    assert rows[0].index("warning") == header.index("torch.compile")
    rows = json.loads(_run(["rules", "--json"], tmp_path).output)
    assert rows[0]["code"] == "CG101"
    doc = _run(["rule", "CG101"], tmp_path).output
    for heading in ("What it does", "Why is this bad?", "Example", "Use instead"):
        assert heading in doc
    assert _run(["rule", "tensor-item"], tmp_path).output == doc
