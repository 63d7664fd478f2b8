"""`--region NAME`: a declared region only adds. It never loses a finding of the run without it, it
matches nested functions, and a name that matches nothing is a usage error that names the near ones."""

from __future__ import annotations

import ast
import textwrap

import pytest
from check_util import FIXTURES, make_writer

from cgkit.check import check_paths, check_source
from cgkit.check.config import Config
from cgkit.errors import CgkitError

# The capture is inside `step`, whose tensor argument is known only from its caller.
CAPTURE_IN_STEP = """
import torch


def step(g, x):
    with torch.cuda.graph(g):
        if x.sum() > 0:
            y = x * 2


step(torch.cuda.CUDAGraph(), torch.randn(8, device="cuda"))
"""

NESTED = """
import torch


def outer():
    def inner(t):
        return t.sum().item()
    return inner


class Runner:
    def run(self, t):
        def body(u):
            return u.cpu()
        return body(t)
"""


def _keys(result):
    return {(f.path, f.line, f.col, f.code) for f in result.findings}


def _check(text, regions=None):
    result = check_source(textwrap.dedent(text).lstrip("\n"), path="t.py", regions=regions)
    assert not result.errors, result.errors
    return result


def test_declaring_the_function_that_holds_a_capture_keeps_its_finding():
    default = _check(CAPTURE_IN_STEP)
    assert [f.code for f in default.findings] == ["CG201"]
    declared = _check(CAPTURE_IN_STEP, regions=["step"])
    assert [(f.code, f.severity) for f in declared.findings] == [("CG201", "error")]


def test_nested_functions_match_by_qualified_or_bare_name():
    assert _check(NESTED).findings == []
    for name in ("outer.inner", "inner"):
        assert [(f.line, f.code, f.severity) for f in _check(NESTED, [name]).findings] == [(6, "CG101", "error")]
    for name in ("Runner.run.body", "body", "Runner.run"):
        assert [(f.line, f.code) for f in _check(NESTED, [name]).findings] == [(13, "CG102")]


def test_an_unknown_name_is_an_error_that_names_the_near_ones():
    with pytest.raises(CgkitError, match=r"--region stepp: .*did you mean: step\?"):
        _check(CAPTURE_IN_STEP, regions=["stepp"])
    with pytest.raises(CgkitError, match=r"--region zzz: .*\(they define: step\)"):
        _check(CAPTURE_IN_STEP, regions=["zzz"])
    with pytest.raises(CgkitError, match=r"--region Runner: class Runner has no forward\(\).*\(Runner.run\)"):
        _check(NESTED, regions=["Runner"])


def test_project_wide_config_regions_need_not_be_in_every_file(tmp_path):
    root = make_writer(tmp_path)({"t.py": textwrap.dedent(CAPTURE_IN_STEP)})
    result = check_paths([str(root / "t.py")], config=Config(regions=["train_step", "step"]))
    assert [f.code for f in result.findings] == ["CG201"]


def test_cli_unknown_region_exits_2(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from cgkit.cli import main

    (tmp_path / "t.py").write_text(CAPTURE_IN_STEP)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", "t.py", "--region", "stpe", "--no-config"])
    assert result.exit_code == 2 and "did you mean: step?" in result.output


def _functions(path):
    """Every function of a file by qualified name, as --region takes them (and classes with a forward)."""
    names = []

    def visit(body, prefix):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.append(prefix + node.name)
            elif isinstance(node, ast.ClassDef) and any(getattr(n, "name", "") == "forward" for n in node.body):
                names.append(prefix + node.name)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(node.body, prefix + node.name + ".")

    visit(ast.parse(path.read_bytes()).body, "")
    return names


def _parses(path) -> bool:
    try:
        ast.parse(path.read_bytes())
    except (SyntaxError, ValueError):
        return False
    return True


SINGLE_FILE_FIXTURES = sorted(p for p in FIXTURES.rglob("*.py") if p.parent.parent == FIXTURES and _parses(p))


@pytest.mark.parametrize("case", SINGLE_FILE_FIXTURES, ids=[f"{p.parent.name}/{p.stem}" for p in SINGLE_FILE_FIXTURES])
def test_a_declared_region_never_loses_a_finding(case, monkeypatch):
    """For each fixture and each function in it: the findings with `--region FUNC` include every
    finding of the run without it (same place, same code, no lower severity)."""
    monkeypatch.chdir(case.parent)
    default = check_paths([case.name], config=Config())
    rank = {"error": 0, "warning": 1, "info": 2}
    before = {(f.path, f.line, f.col, f.code): rank[f.severity] for f in default.findings}
    for name in _functions(case):
        after = {(f.path, f.line, f.col, f.code): rank[f.severity]
                 for f in check_paths([case.name], regions=[name], config=Config()).findings}
        lost = sorted(key for key in before if key not in after or after[key] > before[key])
        assert not lost, f"--region {name} lost {lost}"
