"""`cgkit trace` on a real GPU (gpu marker: skipped without CUDA).

* Every rule example that a run can show is found by `cgkit trace --device cuda` at its line, and its
  Use instead is clean; tests/check/test_rules_gpu.py runs the same examples under real capture, so
  the two summaries together say: each example that fails or replays wrong under capture, trace finds.
* The models of tests/models/trace_models.py: hazards at their lines, clean models clean, with torch's
  sync debug mode on as a cross-check.
* `cgkit smoke` on a model whose capture fails prints the located line in its text output.

With CGKIT_GPU_OUT set, a summary goes to $CGKIT_GPU_OUT/trace_rules_gpu.json and the smoke outputs to
$CGKIT_GPU_OUT/smoke-located.txt.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cgkit.check import RULES

pytestmark = pytest.mark.gpu

MODELS = Path(__file__).resolve().parent.parent / "models"
TRACE_MODELS = MODELS / "trace_models.py"
TRACED = sorted(code for code, rule in RULES.items() if rule.trace)
_SUMMARY: dict[str, dict] = {}


def _trace(args: list[str], timeout: float = 600) -> dict:
    done = subprocess.run([sys.executable, "-m", "cgkit", "trace", "--format", "json", "--device", "cuda", *args],
                          capture_output=True, text=True, timeout=timeout)
    try:
        data = json.loads(done.stdout)
    except ValueError:
        data = {"findings": [], "errors": [done.stderr.strip()[-1500:] or f"exit {done.returncode}"]}
    data["returncode"] = done.returncode
    return data


def _trace_example(code: str, which: str, tmp_path) -> dict:
    rule = RULES[code]
    path = tmp_path / f"{code}_{which}.py"
    path.write_text(getattr(rule, which))
    if rule.trace == "compile-step":
        return _trace(["--workflow", "compile", "--step", f"{path}:step", "--inputs", f"{path}:inputs"])
    return _trace([str(path)])


@pytest.fixture(scope="module", autouse=True)
def _summary():
    yield
    out = os.environ.get("CGKIT_GPU_OUT")
    if out and _SUMMARY:
        import torch

        worker = os.environ.get("PYTEST_XDIST_WORKER")
        name = f"trace_rules_gpu.{worker}.json" if worker else "trace_rules_gpu.json"
        Path(out, name).write_text(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name(),
                                               "rules": _SUMMARY}, indent=1))


@pytest.mark.parametrize("code", TRACED)
def test_rule_example_is_found_on_the_gpu(code, tmp_path):
    example = _trace_example(code, "example", tmp_path)
    fixed = _trace_example(code, "use_instead", tmp_path)
    found = sorted({f["line"] for f in example["findings"] if f["code"] == code})
    loud = [(f["code"], f["line"]) for f in fixed["findings"] if f["severity"] in ("error", "warning")]
    _SUMMARY[code] = {"found_at": found, "example_codes": sorted({f["code"] for f in example["findings"]}),
                      "use_instead_findings": loud, "errors": example["errors"] + fixed["errors"]}
    assert not example["errors"], example["errors"]
    assert found, [(f["code"], f["line"]) for f in example["findings"]]
    assert not fixed["errors"] and not loud, (fixed["errors"], loud)


HAZARDS = {  # factory: (inputs, code); the line is the `# HAZARD CODE` comment in trace_models.py
    "item_sync": ("batch", "CG101"), "data_dependent_shape": ("batch", "CG203"), "pageable_copy": ("batch", "CG301"),
    "host_random": ("batch", "CG403"), "tensor_branch": ("batch", "CG201"), "changing_scalar": ("batch", "CG404"),
    "python_random": ("batch", "CG403"), "masked_transformer": ("sequence", "CG103"),
}


def _marker_lines(code: str) -> set[int]:
    return {n for n, line in enumerate(TRACE_MODELS.read_text().splitlines(), 1) if f"# HAZARD {code}" in line}


@pytest.mark.parametrize("factory", sorted(HAZARDS))
def test_model_hazards_on_the_gpu(factory):
    inputs, code = HAZARDS[factory]
    data = _trace(["--model", f"{TRACE_MODELS}:{factory}", "--inputs", f"{TRACE_MODELS}:{inputs}"])
    assert not data["errors"], data["errors"]
    found = {(f["code"], f["line"]) for f in data["findings"]}
    assert any(c == code and line in _marker_lines(code) for c, line in found), found


@pytest.mark.parametrize(("factory", "inputs"), [("mlp", "batch"), ("convnet", "images"),
                                                 ("causal_transformer", "sequence"), ("dict_outputs", "batch")])
@pytest.mark.parametrize("mode", ["inference", "training"])
def test_clean_models_on_the_gpu(factory, inputs, mode):
    data = _trace(["--model", f"{TRACE_MODELS}:{factory}", "--inputs", f"{TRACE_MODELS}:{inputs}", "--mode", mode])
    found = [(f["code"], f["line"], f["message"], f["trace"]["operation"]) for f in data["findings"]]
    assert not data["errors"] and not found, (data["errors"], found)


@pytest.mark.parametrize(("name", "model", "inputs", "where"), [
    ("item", MODELS / "syncs_in_forward.py", "example", "syncs_in_forward.py:14: CG101"),
    ("nn-mask", TRACE_MODELS, "sequence", "trace_models.py:71: CG103"),
])
def test_smoke_prints_the_located_line_when_capture_fails(name, model, inputs, where):
    factory = "build" if model.name == "syncs_in_forward.py" else "masked_transformer"
    done = subprocess.run([sys.executable, "-m", "cgkit", "smoke", "--workflow", "manual", "--model",
                           f"{model}:{factory}", "--inputs", f"{model}:{inputs}"],
                          capture_output=True, text=True, timeout=900)
    out = os.environ.get("CGKIT_GPU_OUT")
    if out:
        with open(Path(out) / "smoke-located.txt", "a") as fh:
            fh.write(f"=== {name}: exit {done.returncode}\n{done.stdout}\n{done.stderr[-2000:]}\n")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "located" in done.stdout and where in done.stdout, done.stdout
