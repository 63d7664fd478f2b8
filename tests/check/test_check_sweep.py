"""The checker never crashes: run it over the standard library and part of torch (zero internal
errors). The full torch package is swept by benchmarks/check_speed.py."""

from __future__ import annotations

import os
import sysconfig

import pytest

from cgkit.check import check_paths
from cgkit.check.config import Config


def _stdlib_paths() -> list[str]:
    root = sysconfig.get_paths()["stdlib"]
    return [
        os.path.join(root, name)
        for name in sorted(os.listdir(root))
        if name not in ("site-packages", "dist-packages", "__pycache__") and (name.endswith(".py") or "." not in name)
    ]


def test_stdlib_has_no_internal_errors():
    result = check_paths(_stdlib_paths(), config=Config())
    assert result.lines > 100_000
    assert result.errors == []


def test_torch_sample_has_no_internal_errors():
    torch_spec = __import__("importlib.util").util.find_spec("torch")
    if torch_spec is None or not torch_spec.submodule_search_locations:
        pytest.skip("torch is not installed")
    root = list(torch_spec.submodule_search_locations)[0]
    paths = [os.path.join(root, d) for d in ("nn", "optim", "cuda", "amp", "utils", "_dynamo")]
    result = check_paths([p for p in paths if os.path.isdir(p)], config=Config())
    assert result.lines > 50_000
    assert result.errors == []
