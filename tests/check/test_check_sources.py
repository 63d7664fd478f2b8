"""Robustness: notebooks, syntax errors, bad encodings, multi-file projects, column units."""

import json

import pytest
from check_util import make_writer

from cgkit.check import check_paths
from cgkit.check.config import Config

REGION = """import torch
x = torch.randn(8, device="cuda")
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    a = x.sum().item()
"""


@pytest.fixture
def write(tmp_path):
    return make_writer(tmp_path)


def _check(paths):
    return check_paths([str(p) for p in paths], config=Config())


def test_notebook_code_cells(write):
    nb = {
        "cells": [
            {"cell_type": "markdown", "source": ["# title"]},
            {"cell_type": "code", "source": ["%matplotlib inline\n", "import torch\n", "x = torch.randn(8, device='cuda')"]},
            {"cell_type": "code", "source": "g = torch.cuda.CUDAGraph()\nwith torch.cuda.graph(g):\n    y = x.cpu()\n"},
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    root = write({"nb.ipynb": json.dumps(nb)})
    result = _check([root / "nb.ipynb"])
    assert [(f.code, f.cell, f.line) for f in result.findings] == [("CG102", 2, 3)]


def test_broken_notebook_is_reported(write):
    root = write({"bad.ipynb": "{not json"})
    assert [f.code for f in _check([root / "bad.ipynb"]).findings] == ["CG902"]


def test_syntax_error_reported_and_others_checked(write):
    root = write({"a_broken.py": "def f(:\n    pass\n", "b_good.py": REGION})
    result = _check([root])
    assert not result.errors
    assert sorted(f.code for f in result.findings) == ["CG101", "CG901"]
    broken = next(f for f in result.findings if f.code == "CG901")
    assert broken.path.endswith("a_broken.py") and broken.line == 1


def test_bad_encoding_reported_and_others_checked(write):
    root = write({"latin.py": 'print("caf\xe9")\n'.encode("latin-1"), "good.py": REGION})
    result = _check([root])
    assert sorted(f.code for f in result.findings) == ["CG101", "CG902"]


def test_declared_encoding_is_honoured(write):
    src = '# -*- coding: latin-1 -*-\n' + REGION.replace("a = x", "s = 'é'; a = x")
    root = write({"latin.py": src.encode("latin-1")})
    result = _check([root / "latin.py"])
    [finding] = result.findings
    assert finding.code == "CG101"
    # Columns count characters, not UTF-8 bytes.
    line = src.splitlines()[finding.line - 1]
    assert line[finding.col - 1 :].startswith("x.sum().item()")


def test_null_bytes_do_not_crash(write):
    root = write({"nul.py": b"x = 1\x00\n"})
    result = _check([root / "nul.py"])
    assert not result.errors
    assert [f.code for f in result.findings] == ["CG901"]


def test_follows_imports_to_unchecked_sibling(write):
    root = write({
        "train.py": "import torch\nfrom helpers import loss\n"
        "x = torch.randn(8, device='cuda')\ng = torch.cuda.CUDAGraph()\n"
        "with torch.cuda.graph(g):\n    y = loss(x)\n",
        "helpers.py": "def loss(t):\n    return t.sum().item()\n",
    })
    result = _check([root / "train.py"])
    [finding] = result.findings
    assert finding.path.endswith("helpers.py") and finding.code == "CG101"
    assert [s["name"] for s in finding.chain] == ["loss()"]


def test_cycles_and_recursion_terminate(write):
    src = REGION.replace("a = x.sum().item()", "a = f(x)") + (
        "\ndef f(t):\n    return g2(t)\n\ndef g2(t):\n    if t.sum() > 0:\n        return f(t)\n    return t\n"
    )
    result = _check([write({"cyc.py": src}) / "cyc.py"])
    assert [f.code for f in result.findings] == ["CG201"]
