import json

from cgkit.check import check_source
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
    assert finding["url"] == "references/rules.md#cg101-tensor-item"


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
