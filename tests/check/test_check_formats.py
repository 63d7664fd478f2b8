import json
from pathlib import Path

from cgkit.check import check_paths, check_source
from cgkit.check.config import Config
from cgkit.check.formats import github, render, sarif, text, to_json

SRC = """import torch

x = torch.randn(8, device="cuda")


def helper(t):
    return t.sum().item()


g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    y = helper(x)
    z = x.cpu()
"""


def _result():
    return check_source(SRC, path="demo.py")


def test_text_is_ruff_like():
    out = text(_result())
    assert "demo.py:7:12: CG101 [error]" in out
    assert "region: with torch.cuda.graph(g) at L11 -> helper() L6" in out
    assert "fix: " in out
    assert out.rstrip().endswith("in 1 file(s).")


def test_json_fields():
    data = json.loads(to_json(_result()))
    assert data["errors"] == []
    finding = data["findings"][0]
    for key in ("path", "line", "col", "end_line", "end_col", "code", "name", "category", "severity",
                "message", "fix", "region", "chain", "url"):
        assert key in finding
    assert finding["region"]["kind"] == "torch.cuda.graph"
    assert finding["chain"][0]["name"] == "helper()"
    # The rule's section in this cgkit's own bundle (`cgkit skill path`), as an absolute path that exists.
    path, _, anchor = finding["url"].partition("#")
    assert Path(path).is_absolute() and Path(path).is_file() and path.endswith("references/rules.md")
    assert anchor == "cg101-tensor-item" and "## CG101 tensor-item" in Path(path).read_text()


def test_sarif_links_nowhere_unverified():
    """No informationUri or helpUri: cgkit has no checked public address; the help travels in the SARIF."""
    text = sarif(_result())
    assert "informationUri" not in text and "helpUri" not in text and "http" not in text.replace(
        "https://json.schemastore.org/sarif-2.1.0.json", "")


def test_sarif_shape():
    doc = json.loads(sarif(_result()))
    assert doc["version"] == "2.1.0"
    run = doc["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert {r["id"] for r in rules} >= {"CG101", "CG102"}
    cg101 = next(r for r in rules if r["id"] == "CG101")
    assert "### Why is this bad?" in cg101["help"]["markdown"]
    result = run["results"][0]
    assert result["level"] == "error"
    region = result["locations"][0]["physicalLocation"]["region"]
    assert region["startLine"] == 7 and region["startColumn"] == 12
    assert rules[result["ruleIndex"]]["id"] == result["ruleId"]


def test_github_annotations():
    out = github(_result()).splitlines()
    assert out[0].startswith("::error file=demo.py,line=7,col=12,endLine=7,endColumn=")
    assert "title=cgkit CG101 (tensor-item)::" in out[0]
    assert "%0Aregion: " in out[0]
    assert all("\n" not in line for line in out)


def test_github_levels_and_escaping():
    from cgkit.check.model import CheckResult, Finding

    f = Finding("a,b:c.py", 1, 1, 1, 2, "CG401", "host-side-effect", "host-code", "warning", "50% done", "fix")
    g = Finding("a.py", 1, 1, 1, 2, "CG201", "tensor-condition", "dynamic-control-flow", "info", "m", "fix")
    lines = github(CheckResult([f, g], [])).splitlines()
    assert lines[0].startswith("::warning file=a%2Cb%3Ac.py,")
    assert "50%25 done" in lines[0]
    assert lines[1].startswith("::notice ")


def test_render_dispatch():
    for fmt in ("text", "json", "sarif", "github"):
        assert render(_result(), fmt)


def test_a_chain_across_files_names_each_file(tmp_path, monkeypatch):
    (tmp_path / "helpers.py").write_text("def loss(t):\n    return t.sum().item()\n")
    (tmp_path / "train.py").write_text("import torch\nfrom helpers import loss\nx = torch.randn(8, device='cuda')\n"
                                       "g = torch.cuda.CUDAGraph()\nwith torch.cuda.graph(g):\n    y = loss(x)\n")
    monkeypatch.chdir(tmp_path)
    out = text(check_paths(["train.py"], config=Config()))
    assert "helpers.py:2:12: CG101" in out
    # The region is in train.py, the finding in helpers.py: the region's line says which file it is in.
    assert "region: with torch.cuda.graph(g) at train.py:5 -> loss() L1" in out


NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# A notebook\n", "with prose"]},
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
         "source": ["import torch\n", "x = torch.randn(8, device='cuda')"]},
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
         "source": ["g = torch.cuda.CUDAGraph()\n", "with torch.cuda.graph(g):\n", "    y = x.sum().item()\n"]},
    ],
    "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
}


def _notebook_result(tmp_path, indent):
    raw = json.dumps(NOTEBOOK, indent=indent)
    (tmp_path / "nb.ipynb").write_text(raw)
    return check_paths([str(tmp_path / "nb.ipynb")], config=Config()), raw.split("\n")


def test_github_and_sarif_put_a_notebook_finding_on_its_line_of_the_ipynb(tmp_path):
    result, raw = _notebook_result(tmp_path, indent=1)  # as Jupyter writes it: one source line per JSON line
    [finding] = result.findings
    assert (finding.code, finding.cell, finding.line) == ("CG101", 2, 3)
    [annotation] = github(result).splitlines()
    line = int(annotation.split("line=")[1].split(",")[0])
    assert "y = x.sum().item()" in raw[line - 1]  # the .ipynb line GitHub shows the annotation on
    assert "col=" not in annotation  # the cell's columns are not the JSON line's
    assert "::CG101" not in annotation and "cell 2, line 3: CG101" in annotation
    location = json.loads(sarif(result))["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert location["region"]["startLine"] == line
    assert json.loads(to_json(result))["findings"][0]["file_line"] == line


def test_a_notebook_on_one_line_still_annotates_that_line(tmp_path):
    result, raw = _notebook_result(tmp_path, indent=None)
    assert len(raw) == 1
    assert ",line=1,endLine=1," in github(result)
