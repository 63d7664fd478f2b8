"""The DDP recipes on every GPU of the machine under torchrun (gpu marker; needs 2 or more GPUs).

With different data on each rank, parameters stay identical across ranks only if the gradient
all-reduce ran on every step: inside the graph for `manual --ddp` (DDP built on a side stream,
11 warm-up iterations, then the whole step captured), eagerly from DDP's hooks for `callables --ddp`.
Each rank's graphed run is compared with an eager DDP run from the same start on the same data.
Reports go to $CGKIT_GPU_OUT/recipes/ like the other GPU cases.
"""

import json

import pytest
from test_recipes_gpu import smoke

CASES = {
    "manual-ddp-multi": ["--workflow", "manual", "--mode", "training", "--ddp"],
    "callables-ddp-multi": ["--workflow", "callables", "--mode", "training", "--ddp"],
}


def gpu_count() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count()


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CASES))
def test_ddp_recipe_on_all_gpus(name):
    gpus = gpu_count()
    if gpus < 2:
        pytest.skip(f"needs 2 or more GPUs (this machine has {gpus})")
    done, report = smoke([*CASES[name], "--nproc", str(gpus)], name)
    assert done.returncode == 0, json.dumps(report, indent=1) + done.stderr[-2000:]
    assert report["world_size"] == gpus
    assert report["ranks_agree"] is True
    assert report["captured"] and report["correct"]
    assert report["speedup"] > 1.0
