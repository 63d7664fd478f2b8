"""The Transformer Engine and Megatron-Core workflows through `cgkit smoke` on a real GPU.

Like test_recipes_gpu.py: each case runs `python -m cgkit smoke --workflow ... --json` in a
subprocess and keeps its report under $CGKIT_GPU_OUT/recipes. The cases skip, saying why, when
transformer_engine.pytorch or megatron.core do not import (scripts/device_te_setup.sh installs
them into /tmp/site; scripts/gpu_suite.sh te puts that on PYTHONPATH).
"""

import functools
import json
import subprocess
import sys

import pytest
from test_recipes_gpu import smoke

TE = "transformer_engine.pytorch"
MCORE = "megatron.core"

# name: (scaffold arguments, modules the recipe needs)
CASES = {
    "te-fp8-delayed": (["--workflow", "te", "--fp8", "delayed"], [TE]),
    "te-bf16-microbatches": (["--workflow", "te", "--microbatches", "3"], [TE]),
    "te-fp8-current-microbatches": (["--workflow", "te", "--fp8", "current", "--microbatches", "2"], [TE]),
    "mcore-layer-local": (["--workflow", "mcore-layer"], [MCORE]),
    "mcore-layer-te": (["--workflow", "mcore-layer", "--impl", "transformer_engine"], [MCORE, TE]),
    "mcore-full": (["--workflow", "mcore-full", "--microbatches", "2"], [MCORE]),
}


@functools.cache
def import_error(module):
    """Why `module` does not import in the interpreter the recipes run with (None when it does)."""
    done = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=300)
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CASES))
def test_te_and_megatron_recipes_capture_and_match_eager(name):
    args, needs = CASES[name]
    for module in needs:
        error = import_error(module)
        if error:
            pytest.skip(f"{module} does not import ({error}); install it with scripts/device_te_setup.sh")
    done, report = smoke([*args, "--timeout", "600"], name)
    assert done.returncode == 0, json.dumps(report, indent=1) + done.stderr[-3000:]
    assert report["verdict"] == "passed"
    assert report["captured"] and report["correct"], report.get("error")
    assert report["replays_checked"] >= 4
    assert report["graph_launches_per_step"] >= 1
    assert report["eager_ms"] > 0 and report["graphed_ms"] > 0 and report["kernel_floor_ms"] > 0
    if name == "te-fp8-delayed":
        # The demo's sweep: where TE graphs pay (eager vs graphed vs the kernel-time floor).
        rows = report["sweep"]
        assert len(rows) == 4 and all("graphed_ms" in row for row in rows), rows
