"""Fixture pairs: ``fixtures/<family>/<case>.py`` (or a ``<case>/`` folder for a multi-file project)
next to ``<case>.txt``, the expected findings. Adding a case is adding two files.

Regenerate the expectations after a deliberate change with::

    CGKIT_UPDATE_FIXTURES=1 python -m pytest tests/check/test_check_fixtures.py

then review the diff: every ``# CGxxx`` comment in a case should have its line in the .txt, and no
``# OK`` line should.
"""

from __future__ import annotations

import os
import re

import pytest
from check_util import FIXTURES, render_findings

from cgkit.check import check_paths
from cgkit.check.config import Config

_DIRECTIVE = re.compile(r"#\s*cgkit-test:\s*(.*)")


def _cases():
    out = []
    for family in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        for item in sorted(family.iterdir()):
            if item.name.startswith((".", "_")):
                continue
            if item.suffix == ".py" or item.is_dir():
                out.append(item)
    return out


CASES = _cases()


def _options(case) -> dict:
    opts: dict = {}
    first = case if case.is_file() else None
    if first is not None:
        for line in first.read_text(encoding="utf-8", errors="replace").splitlines()[:3]:
            match = _DIRECTIVE.search(line)
            if match:
                for part in match.group(1).split():
                    key, _, value = part.partition("=")
                    opts[key] = [v for v in value.split(",") if v]
    return opts


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.stem}" for c in CASES])
def test_fixture(case, monkeypatch):
    expected_file = case.with_suffix(".txt") if case.is_file() else case.parent / f"{case.name}.txt"
    opts = _options(case)
    monkeypatch.chdir(case.parent)
    result = check_paths([case.name], regions=opts.get("regions"), select=opts.get("select"), config=Config())
    assert not result.errors, result.errors
    actual = render_findings(result.findings, str(case.parent if case.is_file() else case))
    if os.environ.get("CGKIT_UPDATE_FIXTURES"):
        expected_file.write_text(actual, encoding="utf-8")
    assert expected_file.exists(), f"missing {expected_file.name}; run with CGKIT_UPDATE_FIXTURES=1"
    assert actual == expected_file.read_text(encoding="utf-8")


def test_every_rule_has_a_fixture():
    """Each rule code appears in at least one expected-findings file."""
    from cgkit.check import RULES

    seen = set()
    for txt in FIXTURES.rglob("*.txt"):
        seen.update(re.findall(r"\bCG\d{3}\b", txt.read_text(encoding="utf-8")))
    run_only = {code for code, rule in RULES.items() if not rule.static}  # cgkit trace's: tests/trace/
    missing = sorted(set(RULES) - seen - run_only - {"CG902"})  # CG902 needs bytes: see test_sources.py
    assert not missing, f"rules with no fixture case: {missing}"
