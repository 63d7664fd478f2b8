"""README's two commands work as written: the quick start (install, then prove the demo model) and
the test command, which CI (.ci/run) runs word for word on a clean clone of a CPU machine."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib

import pytest
from conftest import ROOT
from docs_util import code_blocks

README = ROOT / "README.md"
CI = ROOT / ".ci" / "run"


def _section_block(heading: str) -> list[str]:
    """The lines of the first code block under a README heading."""
    text = README.read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    line = text[:start].count("\n") + 1
    last = text[: end if end != -1 else len(text)].count("\n") + 1
    [block, *_] = [b for b in code_blocks(README) if line < b.line < last]
    return [ln.strip() for ln in block.text.strip().splitlines()]


def _extras(install_line: str) -> set[str]:
    match = re.search(r'-e\s+"?\.\[([\w,]+)\]"?', install_line)
    assert match, f"not an install of this checkout with extras: {install_line}"
    return set(match.group(1).split(","))


def _declared_extras() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def test_ci_runs_readme_test_commands_as_written():
    commands = _section_block("Tests")
    assert commands[-1] == "python -m pytest -q"
    ci = [ln.strip() for ln in CI.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert ci[-len(commands):] == commands, f".ci/run must end with README's test commands: {commands}"


def test_readme_installs_bring_what_its_commands_need():
    declared = _declared_extras()
    [quick_start] = _section_block("Quick start")
    install, _, run = quick_start.partition(" && ")
    assert "torch" in _extras(install)  # cgkit smoke runs the recipe: it needs torch
    assert run.startswith("cgkit smoke ")
    [test_install, _test_run] = _section_block("Tests")
    assert _extras(test_install) >= {"torch", "test"}
    assert _extras(install) | _extras(test_install) <= set(declared)
    test_extra = " ".join(declared["test"])
    for tool in ("pytest", "ruff", "build"):  # what the test suite runs, beside torch
        assert tool in test_extra


def test_quick_start_command_says_why_it_stops_without_a_gpu():
    """On a CPU machine (CI), README's quick start stops with exit status 2 and says why, as README says."""
    [quick_start] = _section_block("Quick start")
    argv = shlex.split(quick_start.partition(" && ")[2])
    assert argv[0] == "cgkit"
    done = subprocess.run([sys.executable, "-m", "cgkit", *argv[1:]], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    if done.returncode == 0:
        pytest.skip("a GPU is here: the quick start ran (the gpu tests cover it)")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no CUDA device" in done.stderr or "torch is not installed" in done.stderr


def test_a_test_that_needs_ruff_skips_and_says_why_without_it(monkeypatch):
    import importlib.util
    import shutil

    import conftest

    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(pytest.skip.Exception, match="ruff is not installed"):
        conftest.ruff_command()
