"""Every recipe through `cgkit smoke` on a real GPU (gpu marker: skipped without CUDA).

Each case runs `python -m cgkit smoke --workflow ... --json` in a subprocess, as a user would, and
checks the verdict, the exit status and the report. Reports are kept under $CGKIT_GPU_OUT/recipes
when that variable is set (scripts/gpu_suite.sh sets it).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

MODELS = Path(__file__).resolve().parent.parent / "models"
GPT = MODELS / "tiny_gpt.py"
GPT_OPTS = ["--model", f"{GPT}:build", "--inputs", f"{GPT}:example_batch"]
GPT_LOSS = ["--loss", f"{GPT}:next_token_loss"]
TRACE_MODELS = MODELS / "trace_models.py"
CONVNET_OPTS = ["--model", f"{TRACE_MODELS}:convnet", "--inputs", f"{TRACE_MODELS}:images"]  # BatchNorm
MLP_OPTS = ["--model", f"{TRACE_MODELS}:mlp", "--inputs", f"{TRACE_MODELS}:batch"]  # Dropout

PASSING = {
    "manual-inference": ["--workflow", "manual"],
    "manual-inference-bf16": ["--workflow", "manual", "--amp", "bf16"],
    "manual-inference-fp16": ["--workflow", "manual", "--amp", "fp16"],
    "manual-buckets": ["--workflow", "manual", "--buckets", "1,2,4,8,16"],
    "manual-training-adam": ["--workflow", "manual", "--mode", "training"],
    "manual-training-sgd": ["--workflow", "manual", "--mode", "training", "--optimizer", "sgd"],
    "manual-training-adamw-bf16": ["--workflow", "manual", "--mode", "training", "--optimizer", "adamw", "--amp", "bf16"],
    "manual-training-ddp": ["--workflow", "manual", "--mode", "training", "--ddp"],
    "manual-gpt-training": ["--workflow", "manual", "--mode", "training", *GPT_OPTS, *GPT_LOSS],
    "manual-gpt-inference": ["--workflow", "manual", *GPT_OPTS],
    "manual-fuse-inference": ["--workflow", "manual", "--fuse"],
    "manual-fuse-training": ["--workflow", "manual", "--mode", "training", "--fuse"],
    "manual-fuse-training-func": ["--workflow", "manual", "--mode", "training", "--fuse", "--gradients", "func"],
    "manual-fuse-gpt-training-bf16": ["--workflow", "manual", "--mode", "training", "--fuse", "--amp", "bf16",
                                      *GPT_OPTS, *GPT_LOSS],
    "callables-training": ["--workflow", "callables"],
    "callables-inference": ["--workflow", "callables", "--mode", "inference"],
    "callables-layers-bf16": ["--workflow", "callables", "--layers", "model.layers", "--amp", "bf16"],
    "callables-gpt-layers": ["--workflow", "callables", "--layers", "model.blocks", *GPT_OPTS, *GPT_LOSS],
    "callables-training-ddp": ["--workflow", "callables", "--ddp"],
    "compile-inference": ["--workflow", "compile"],
    "compile-training": ["--workflow", "compile", "--mode", "training"],
    "compile-training-autograd": ["--workflow", "compile", "--mode", "training", "--gradients", "autograd"],
    "compile-training-eager-step": ["--workflow", "compile", "--mode", "training", "--optimizer-step", "eager"],
    "compile-training-sgd": ["--workflow", "compile", "--mode", "training", "--optimizer", "sgd"],
    "compile-training-batchnorm": ["--workflow", "compile", "--mode", "training", *CONVNET_OPTS],
    "compile-training-dropout": ["--workflow", "compile", "--mode", "training", *MLP_OPTS],
    "manual-fuse-training-func-batchnorm": ["--workflow", "manual", "--mode", "training", "--fuse", "--gradients", "func",
                                            *CONVNET_OPTS],
    "compile-gpt-inference": ["--workflow", "compile", *GPT_OPTS],
    "compile-gpt-training": ["--workflow", "compile", "--mode", "training", *GPT_OPTS, *GPT_LOSS],
    "compile-gpt-training-bf16": ["--workflow", "compile", "--mode", "training", "--amp", "bf16", *GPT_OPTS, *GPT_LOSS],
    "profile-inference": ["--workflow", "profile"],
    "profile-training": ["--workflow", "profile", "--mode", "training"],
}


def smoke(args, name):
    done = subprocess.run([sys.executable, "-m", "cgkit", "smoke", "--json", *args],
                          capture_output=True, text=True, timeout=900)
    report = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
    out = os.environ.get("CGKIT_GPU_OUT")
    if out:
        folder = Path(out) / "recipes"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.json").write_text(json.dumps({"args": args, "returncode": done.returncode,
                                                         "report": report, "stderr": done.stderr[-3000:]}))
    return done, report


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(PASSING))
def test_recipe_captures_matches_eager_and_reports_its_speed(name):
    done, report = smoke(PASSING[name], name)
    assert done.returncode == 0, json.dumps(report, indent=1) + done.stderr[-2000:]
    assert report["verdict"] == "passed"
    if report["workflow"] == "profile":
        assert report["kernels_per_step"] > 0 and report["speedup_bound"] >= 1.0
        return
    assert report["captured"] and report["correct"]
    assert report["replays_checked"] >= 4
    assert report["graph_launches_per_step"] >= 1
    # Speed is judged in benchmarks/ (one case at a time), not here (8 cases share the GPU): the
    # report must carry every figure it is judged on.
    assert report["eager_ms"] > 0 and report["graphed_ms"] > 0 and report["kernel_floor_ms"] > 0
    assert report["graphed_kernel_ms"] > 0
    if report["mode"] == "inference" and "--buckets" not in PASSING[name]:
        assert report["replay_only_ms"] > 0  # the graph alone, timed (compared in benchmarks, not here)
    if report["workflow"] == "compile":
        assert report["cudagraph_skips"] == 0, report["cudagraph_skip_reasons"]
    if "--ddp" in PASSING[name]:
        assert report["ranks_agree"] and report["world_size"] >= 1


def smoke_manual_on(model_file, name):
    """The manual recipe on one of tests/models' misbehaving models (factories `build`, `example`)."""
    model = MODELS / model_file
    return smoke(["--workflow", "manual", "--model", f"{model}:build", "--inputs", f"{model}:example"], name)


@pytest.mark.gpu
def test_frozen_python_branch_is_reported_as_incorrect():
    done, report = smoke_manual_on("frozen_branch.py", "frozen-branch")
    assert done.returncode == 1
    assert report["captured"] is True and report["correct"] is False
    assert report["verdict"] == "failed"
    located = [(f["code"], f["line"]) for f in report["located"]["findings"]]
    assert ("CG703", 19) in located, located  # the branch, located by cgkit trace




@pytest.mark.gpu
def test_failed_capture_is_explained():
    done, report = smoke_manual_on("syncs_in_forward.py", "sync-in-forward")
    assert done.returncode == 1
    assert report["captured"] is False and report["stage"] == "capture"
    assert report["error"]
    assert report.get("diagnosis"), "smoke should say the cause and the fix"
    located = [(f["code"], f["line"]) for f in report["located"]["findings"]]
    assert ("CG101", 14) in located, located  # the .item() line, located by cgkit trace


@pytest.mark.gpu
def test_factory_that_raises_is_reported_not_crashed():
    done, report = smoke_manual_on("broken.py", "broken-factory")
    assert done.returncode == 1
    assert "broken on purpose" in report["error"] and report["stage"] == "setup"


@pytest.mark.gpu
def test_compare_recommends_a_correct_approach():
    done = subprocess.run([sys.executable, "-m", "cgkit", "smoke", "--compare", "--json"],
                          capture_output=True, text=True, timeout=1200)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    out = os.environ.get("CGKIT_GPU_OUT")
    if out:
        (Path(out) / "compare.json").write_text(json.dumps(result))
    assert done.returncode == 0, done.stderr[-2000:]
    best = result["recommended"]
    assert best in ("compile", "callables", "manual")
    assert result["results"][best]["correct"] is True
    fastest = min((r["graphed_ms"], n) for n, r in result["results"].items() if r.get("verdict") == "passed")
    assert fastest[1] == best
