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


def test_missing_file_is_reported(tmp_path):
    result = _run(["check", "nope.py", "clean.py"], tmp_path)
    assert result.exit_code == 1
    assert "CG902" in result.output


def test_json_output(tmp_path):
    result = _run(["check", "bad.py", "--format", "json"], tmp_path)
    data = json.loads(result.output)
    assert [f["code"] for f in data["findings"]] == ["CG101"]


def test_rules_and_rule(tmp_path):
    result = _run(["rules"], tmp_path)
    assert result.exit_code == 0
    assert len(result.output.strip().splitlines()) == len(RULES)
    rows = json.loads(_run(["rules", "--json"], tmp_path).output)
    assert rows[0]["code"] == "CG101"
    doc = _run(["rule", "CG101"], tmp_path).output
    for heading in ("What it does", "Why is this bad?", "Example", "Use instead"):
        assert heading in doc
    assert _run(["rule", "tensor-item"], tmp_path).output == doc
