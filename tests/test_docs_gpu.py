"""The runnable examples of SKILL.md and references/ run on a GPU and do what the text says.

A block is runnable when its fence reads ```` ```python runnable ````. Each one asserts the claim
the text around it makes (replay matches eager, a registered generator advances, a Python float is
baked in, ...) and prints one line; here each runs in its own process, since a failed capture can
leave the CUDA context unusable.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from docs_util import REFERENCE_FILES, REFERENCES, SKILL, code_blocks

DOCS = [SKILL, *(REFERENCES / name for name in REFERENCE_FILES)]
RUNNABLE = [b for path in DOCS for b in code_blocks(path) if b.runnable]


def _torch_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _torch_cuda(), reason="needs torch with a CUDA device")
@pytest.mark.parametrize("block", RUNNABLE, ids=[b.where() for b in RUNNABLE])
def test_runnable_example(block, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(block.text)
    env = dict(os.environ, PYTHONWARNINGS="default", TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{block.where()} failed:\n{output[-4000:]}"
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    assert last == _expected_last_line(block), f"{block.where()}: unexpected output\n{output[-2000:]}"


def _expected_last_line(block) -> str:
    """The example's own final print(...): proof it reached the end."""
    for line in reversed(block.text.strip().splitlines()):
        line = line.strip()
        if line.startswith('print("') and line.endswith('")'):
            return line[len('print("') : -2]
    raise AssertionError(f"{block.where()}: a runnable example must end with print(\"...\")")


def test_runnable_examples_end_with_a_message():
    # Runs without a GPU: keeps the examples' contract checkable everywhere.
    assert RUNNABLE
    for block in RUNNABLE:
        _expected_last_line(block)
