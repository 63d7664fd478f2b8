"""Real models' inputs and outputs through `cgkit smoke` on a GPU (gpu marker; issue 13).

Every capturing workflow (manual, callables, compile), inference and training, on models that take
keyword arguments, token ids, boolean masks and non-tensor arguments and return dicts, nested tuples,
dataclasses and mapping objects (tests/models/structures.py), and with bf16 parameters (--dtype).
Then what must fail, fails clearly: a Python count in the output is a frozen value named by its path,
and a model with no floating-point output gets a usage error for the stand-in loss.
Reports are kept under $CGKIT_GPU_OUT/recipes (scripts/gpu_suite.sh stage `structures`).
"""

import json
from pathlib import Path

import pytest
from test_recipes_gpu import smoke

S = Path(__file__).resolve().parent.parent / "models" / "structures.py"
MODELS = {
    "dict-nested": ["--model", f"{S}:build_dict", "--inputs", f"{S}:inputs_dict"],
    "kwargs-dataclass": ["--model", f"{S}:build_dataclass", "--inputs", f"{S}:inputs_kwargs"],
    "args-kwargs-mapping": ["--model", f"{S}:build_mapping", "--inputs", f"{S}:inputs_args_kwargs"],
    "kwargs-dataclass-bf16": ["--model", f"{S}:build_dataclass", "--inputs", f"{S}:inputs_kwargs", "--dtype", "bf16"],
}
CASES = {
    f"{workflow}-{mode}-{model}": ["--workflow", workflow, "--mode", mode, *args]
    for workflow in ("manual", "callables", "compile")
    for mode in ("inference", "training")
    for model, args in MODELS.items()
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CASES))
def test_structured_model_captures_and_matches_eager(name):
    done, report = smoke(CASES[name], f"structures-{name}")
    assert done.returncode == 0, json.dumps(report, indent=1) + done.stderr[-2000:]
    assert report["captured"] and report["correct"] and report["verdict"] == "passed"
    assert report["graph_launches_per_step"] >= 1 and report["speedup"] > 0
    if "inference" in name:
        assert len(report["output_leaves"]) >= 3 and report["mismatches"] == []
    else:
        assert report["loss"].startswith("stand-in")


@pytest.mark.gpu
@pytest.mark.parametrize("workflow", ["manual", "callables"])
def test_a_python_count_in_the_output_is_a_frozen_value_with_its_path(workflow):
    args = ["--workflow", workflow, "--mode", "inference", "--model", f"{S}:build_counting",
            "--inputs", f"{S}:inputs_dict"]
    done, report = smoke(args, f"structures-frozen-{workflow}")
    assert done.returncode == 1 and report["captured"] and not report["correct"]
    assert "output['calls']" in report["error"] and "frozen at capture" in report["error"]
    assert any("output['calls']" in m for m in report["mismatches"])


@pytest.mark.gpu
def test_no_floating_output_is_a_usage_error_for_the_stand_in_loss():
    args = ["--workflow", "manual", "--mode", "training", "--model", f"{S}:build_argmax", "--inputs",
            f"{S}:inputs_dict"]
    done, report = smoke(args, "structures-no-float-output")
    assert done.returncode == 2 and report["usage_error"] is True
    assert "no floating-point tensor" in report["error"] and "--loss" in report["error"]
