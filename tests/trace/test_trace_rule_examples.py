"""Every rule's Example is found by `cgkit trace` when a run can show it, and its Use instead is clean:
the examples are scripts written for the GPU, traced here on the CPU standing in for it. Rules a run
cannot show say why (`trace_blind`). The same examples run under real capture in tests/check/test_rules_gpu.py,
and `cgkit trace` over them on the GPU in tests/gpu/test_trace_gpu.py."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="cgkit trace runs the step: it needs torch")

import pytest

from cgkit.check import RULES, check_source
from cgkit.trace import TraceOptions, trace_script, trace_step

TRACED = sorted(code for code, rule in RULES.items() if rule.trace)
BLIND = sorted(code for code, rule in RULES.items() if not rule.trace)


def trace_example(code: str, which: str, tmp_path):
    rule = RULES[code]
    path = tmp_path / f"{code}_{which}.py"
    path.write_text(getattr(rule, which))
    if rule.trace == "compile-step":
        return trace_step(TraceOptions(step=f"{path}:step", inputs=f"{path}:inputs", workflow="compile", device="cpu"))
    return trace_script(str(path), device="cpu")


@pytest.mark.parametrize("code", TRACED)
def test_example_is_found(code, tmp_path):
    result = trace_example(code, "example", tmp_path)
    assert not result.errors
    lines = [f.line for f in result.findings if f.code == code]
    assert lines, [(f.code, f.line) for f in result.findings]
    if RULES[code].static:  # where cgkit check reports it too: the same line, or inside the region it names
        static = [f.line for f in check_source(RULES[code].example, "example.py").findings if f.code == code]
        assert set(lines) & set(static) or code in SITE_OF_USE, (lines, static)


# Where the run sees the hazard at another line than the static rule: the graph reads a rebound tensor
# at the region's line (the rebinding itself runs no operator); autocast and hooks are seen at the
# make_graphed_callables call (check reports the line that set them up).
SITE_OF_USE = {"CG405", "CG501", "CG503"}


@pytest.mark.parametrize("code", TRACED)
def test_use_instead_is_clean(code, tmp_path):
    result = trace_example(code, "use_instead", tmp_path)
    assert not result.errors
    assert [(f.code, f.line) for f in result.findings if f.severity in ("error", "warning")] == []


@pytest.mark.parametrize("code", BLIND)
def test_rules_a_run_cannot_show_say_why(code):
    assert len(RULES[code].trace_blind) > 30
