"""Each rule's documented Example is reported, and its Use instead is clean (examples are tests)."""

from __future__ import annotations

import re

import pytest

from cgkit.check import CATEGORIES, RULES, check_paths, check_source
from cgkit.check.config import Config

CODES = sorted(RULES)
STATIC = sorted(code for code, rule in RULES.items() if rule.static)  # the rules cgkit check reports


@pytest.mark.parametrize("code", CODES)
def test_rule_data(code):
    rule = RULES[code]
    assert re.fullmatch(r"CG\d{3}", rule.code)
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.name)
    assert rule.category in CATEGORIES
    assert rule.manual in (None, "error", "warning", "info")
    assert rule.compile in (None, "error", "warning", "info")
    assert rule.manual or rule.compile
    for text in (rule.message, rule.fix, rule.what, rule.why, rule.example, rule.use_instead):
        assert text.strip()
    assert rule.what.startswith(("Checks", "Reports"))
    assert rule.trace in (None, "script", "compile-step")
    assert (rule.trace is None) == (rule.trace_blind is not None), "say how trace finds it, or why it cannot"
    assert rule.static or rule.trace, "a rule neither tool reports"


def _check_text(code: str, text: str, tmp_path, name: str):
    if code == "CG902":
        path = tmp_path / f"{name}.py"
        # The example is "saved as Latin-1"; the fixed version declares it.
        path.write_bytes(text.encode("latin-1"))
        return check_paths([str(path)], config=Config())
    return check_source(text, path=f"{name}.py")


@pytest.mark.parametrize("code", STATIC)
def test_example_is_reported(code, tmp_path):
    result = _check_text(code, RULES[code].example, tmp_path, "example")
    assert not result.errors
    assert code in {f.code for f in result.findings}, [f.code for f in result.findings]


@pytest.mark.parametrize("code", CODES)
def test_use_instead_is_clean(code, tmp_path):
    result = _check_text(code, RULES[code].use_instead, tmp_path, "use_instead")
    assert not result.errors
    loud = [(f.code, f.line) for f in result.findings if f.code == code or f.severity in ("error", "warning")]
    assert not loud


def test_codes_are_grouped_by_family():
    from cgkit.check.rules import FAMILIES

    for family in FAMILIES:
        hundreds = {rule.code[:3] for rule in family.RULES}
        assert len(hundreds) == 1, family.__name__
