import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODELS = Path(__file__).resolve().parent / "models"


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (gpu marker); none here")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def models_dir() -> Path:
    return MODELS


def ruff_command() -> list[str]:
    """How to run ruff here; skips the calling test, saying why, when ruff is not installed (it comes
    with the `test` extra: pip install -e ".[test]")."""
    ruff = shutil.which("ruff")
    if ruff:
        return [ruff]
    if importlib.util.find_spec("ruff") is None:
        pytest.skip('ruff is not installed (it comes with the test extra: pip install -e ".[test]")')
    return [sys.executable, "-m", "ruff"]


def run_ruff(path: Path, first_party: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """ruff over a generated script: pyflakes, pycodestyle, bugbear, pyupgrade, import order.

    ``first_party`` names the user's own packages (a script imports them in a section of their own).
    """
    config = ["--config", f"lint.isort.known-first-party = {list(first_party)!r}"] if first_party else []
    cmd = ruff_command()
    return subprocess.run(
        [*cmd, "check", "--isolated", "--select", "E,F,W,B,UP,I", "--line-length", "110",
         "--target-version", "py311", "--output-format", "concise", *config, str(path)],
        capture_output=True, text=True,
    )
