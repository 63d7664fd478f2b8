"""smoke's logic without a GPU: reading reports, verdicts, launchers, tables, explanations."""

import json
import sys
from pathlib import Path

import pytest

from cgkit import recipes, smoke
from cgkit.report import RecipeReport

PASSED_REPORT = {
    "workflow": "manual", "mode": "inference", "captured": True, "correct": True, "max_abs_diff": 0.0,
    "eager_ms": 1.0, "graphed_ms": 0.2, "speedup": 5.0, "graph_memory_mb": 12.0, "replays_checked": 5,
    "error": None, "kernel_floor_ms": 0.18, "graphed_over_floor": 1.11, "graph_launches_per_step": 1.0,
    "gpu": "NVIDIA H200", "torch": "2.11.0",
}


def result(report, path="r.py", returncode=0):
    return smoke.SmokeResult(Path(path), None if report is None else RecipeReport.from_json(report), returncode)


def test_find_report_takes_the_last_json_object_with_a_workflow():
    stdout = "warming up\n{\"x\": 1}\n" + json.dumps(PASSED_REPORT) + "\nbye\n"
    assert smoke.find_report(stdout) == RecipeReport.from_json(PASSED_REPORT)
    assert smoke.find_report(stdout).as_json() == {**PASSED_REPORT, "stage": None}
    assert smoke.find_report("no report here\n{broken json\n") is None


@pytest.mark.parametrize(
    ("changes", "verdict"),
    [({}, "passed"), ({"correct": False}, "failed"), ({"captured": False, "correct": False}, "failed"),
     ({"workflow": "profile", "captured": False, "correct": False}, "passed"),
     ({"workflow": "profile", "error": "boom"}, "failed")],
)
def test_verdict(changes, verdict):
    assert result({**PASSED_REPORT, **changes}).verdict == verdict
    assert result(None).verdict == "failed"


def test_recipe_tags_choose_the_launcher(tmp_path):
    plain, ddp = tmp_path / "plain.py", tmp_path / "ddp.py"
    recipes.write(recipes.ScaffoldOptions(workflow="manual"), plain)
    recipes.write(recipes.ScaffoldOptions(workflow="manual", mode="training", ddp=True), ddp)
    assert smoke.recipe_tags(plain) == {"workflow": "manual", "mode": "inference", "launcher": "python"}
    assert smoke.launch_command(plain, None, "py") == ["py", str(plain)]
    assert smoke.launch_command(ddp, None, "py")[:5] == ["py", "-m", "torch.distributed.run", "--standalone",
                                                        "--nproc_per_node=1"]
    assert "--nproc_per_node=2" in smoke.launch_command(ddp, 2, "py")


def test_format_result_shows_speed_floor_and_memory():
    text = smoke.format_result(result(PASSED_REPORT))
    for expected in ("captured        yes", "5.0x faster", "1.11x the kernel-time floor", "12.0 MB", "PASSED"):
        assert expected in text
    assert "replay only" not in text
    with_replay = smoke.format_result(result({**PASSED_REPORT, "replay_only_ms": 0.15}))
    assert "0.1500 ms/step  (the graph without copies in or out)" in with_replay


def test_failed_capture_is_explained_with_cause_and_fix():
    report = {**PASSED_REPORT, "captured": False, "correct": False, "stage": "capture",
              "error": "AcceleratorError: CUDA error: operation not permitted when stream is capturing"}
    res = result(report, returncode=1)
    res.diagnoses = smoke.explain_failure(res.report, "")
    assert res.diagnoses, "a known capture error must be recognised"
    text = smoke.format_result(res)
    assert "cause" in text and "fix" in text and "FAILED" in text
    assert res.as_dict()["diagnosis"][0]["fix"]


def test_comparison_recommends_the_fastest_correct_approach():
    results = {
        "compile": result({**PASSED_REPORT, "workflow": "compile", "graphed_ms": 0.15, "correct": False}),
        "callables": result({**PASSED_REPORT, "workflow": "callables", "graphed_ms": 0.3}),
        "manual": result({**PASSED_REPORT, "graphed_ms": 0.2}),
    }
    comparison = smoke.Comparison(results)
    assert comparison.recommended == "manual"
    table = smoke.format_comparison(comparison)
    assert "recommended: manual" in table
    manual_row = next(line for line in table.splitlines() if line.startswith("manual"))
    assert manual_row.split()[3:6] == ["1.0000", "0.2000", "5.0x"]  # its own process's eager, graphed, speedup


def test_comparison_says_stay_eager_when_no_approach_beats_eager():
    slow = {"speedup": 0.8, "graphed_ms": 1.25}
    results = {name: result({**PASSED_REPORT, "workflow": name, **slow}) for name in ("compile", "manual")}
    comparison = smoke.Comparison(results)
    assert comparison.recommended is None and set(comparison.passing) == {"compile", "manual"}
    assert "recommended: stay eager" in smoke.format_comparison(comparison)


@pytest.mark.parametrize(
    ("graph_kernel_ms", "cause"),
    [(1.0, "slower kernels"), (0.19, "not launch-bound")],
)
def test_a_graph_slower_than_eager_is_explained(graph_kernel_ms, cause):
    report = {**PASSED_REPORT, "eager_ms": 1.0, "graphed_ms": 1.5, "speedup": 0.67, "graphed_kernel_ms": graph_kernel_ms}
    text = smoke.format_result(result(report))
    assert "0.67x eager's speed: SLOWER" in text and "faster" not in text
    assert cause in text and smoke.SLOWER_THAN_EAGER_DOC in text
    assert smoke.slowdown_note(RecipeReport.from_json(PASSED_REPORT)) is None


def test_a_faster_graph_held_back_by_slower_kernels_names_the_blas_choice():
    """The demo under --fuse (H200): 1.10x eager, but its kernels 8x eager's (the default BLAS choice)."""
    report = {**PASSED_REPORT, "eager_ms": 1.14, "graphed_ms": 1.036, "speedup": 1.1, "kernel_floor_ms": 0.122,
              "graphed_kernel_ms": 0.98}
    text = smoke.format_result(result(report))
    assert "held back" in text and 'preferred_blas_library("cublaslt")' in text
    fine = {**report, "graphed_kernel_ms": 0.13}
    assert smoke.slowdown_note(RecipeReport.from_json(fine)) is None


def test_no_torch_or_no_gpu_raises_nogpu(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(smoke.NoGPU, match="torch is not installed"):
        smoke.require_gpu(str(fake))
    gpuless = tmp_path / "python2"
    gpuless.write_text(f"#!/bin/sh\n{sys.executable} -c 'print(\"[false, \\\"2.13.0+cpu\\\"]\")'\n")
    gpuless.chmod(0o755)
    with pytest.raises(smoke.NoGPU, match="no CUDA device is visible"):
        smoke.require_gpu(str(gpuless))


def test_run_recipe_rejects_a_missing_file():
    with pytest.raises(smoke.CgkitError, match="no such recipe file"):
        smoke.run_recipe(Path("/nonexistent/recipe.py"))


FAKE_DDP_RECIPE = '''
# cgkit-recipe: workflow=manual mode=training launcher=torchrun
import json, os
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
if rank == 0:
    print(json.dumps({"workflow": "manual", "mode": "training", "captured": True, "correct": True,
                      "world_size": world, "sum": value.item()}))
dist.destroy_process_group()
'''


def test_smoke_launches_torchrun_with_several_processes_and_reads_rank0(tmp_path):
    """The multi-process launch path, on the CPU with gloo (CUDA graphs themselves need a GPU)."""
    pytest.importorskip("torch.distributed")
    recipe = tmp_path / "fake_ddp.py"
    recipe.write_text(FAKE_DDP_RECIPE)
    res = smoke.run_recipe(recipe, timeout=300, nproc=2, needs_gpu=False)
    assert res.returncode == 0, res.output_tail
    assert res.report.world_size == 2 and res.report.unknown["sum"] == 3.0
    assert res.verdict == "passed"


def test_nproc_is_only_for_ddp_recipes(tmp_path):
    plain = tmp_path / "plain.py"
    recipes.write(recipes.ScaffoldOptions(workflow="manual"), plain)
    with pytest.raises(smoke.CgkitError, match="--nproc is for DDP recipes"):
        smoke.launch_command(plain, 2, "py")
    with pytest.raises(smoke.CgkitError, match="takes no --nproc or --ddp"):
        smoke.compare(nproc=2)


def test_compare_passes_the_users_options_to_the_approaches_that_take_them():
    with pytest.raises(smoke.CgkitError, match="none takes --fp8"):
        smoke.compare(mode="training", fp8="delayed")
    with pytest.raises(smoke.CgkitError, match="--buckets applies to --mode inference only"):
        smoke.compare(mode="training", buckets="1,2")
    runs = smoke.approaches(None, None, "training", loss=None, optimizer="adamw", amp="bf16", layers="model.layers")
    assert {name: (o.optimizer, o.amp, o.layers) for name, o in runs.items()} == {
        "compile": ("adamw", "bf16", None), "callables": ("adamw", "bf16", "model.layers"),
        "manual": ("adamw", "bf16", None), "manual --fuse": ("adamw", "bf16", None)}
    assert runs["manual --fuse"].fuse and not runs["manual"].fuse
    served = smoke.approaches(None, None, "inference", buckets="1,2,4")
    assert served["manual"].buckets == "1,2,4" and served["compile"].buckets is None
    assert "manual --fuse" not in served  # one fused capture, not one per bucket


def test_a_timeout_stops_the_recipe_and_says_so(tmp_path):
    recipe = tmp_path / "slow.py"
    recipe.write_text("# cgkit-recipe: workflow=manual mode=inference launcher=python\nimport time\ntime.sleep(60)\n")
    res = smoke.run_recipe(recipe, timeout=1, needs_gpu=False)
    assert res.returncode == 124 and res.report.error == "timed out after 1 s"
    assert res.verdict == "failed"


def test_a_failed_capture_is_located_by_trace(tmp_path, models_dir):
    """smoke runs `cgkit trace` on the recipe's own factories and shows the user line and the fix."""
    pytest.importorskip("torch")
    recipe = tmp_path / "graphed.py"
    recipes.write(recipes.ScaffoldOptions(workflow="manual", model=f"{models_dir}/syncs_in_forward.py:build",
                                          inputs=f"{models_dir}/syncs_in_forward.py:example"), recipe)
    command = smoke.trace_command(recipe)
    assert command[3:] == ["trace", "--format", "json", "--workflow", "manual", "--mode", "inference", "--model",
                           f"{recipe.resolve()}:build_model", "--inputs", f"{recipe.resolve()}:build_inputs"]
    located = smoke.locate_failure(recipe)
    assert located.error is None
    (finding,) = located.findings
    assert finding["code"] == "CG101" and finding["path"].endswith("syncs_in_forward.py") and finding["line"] == 14
    report = {**PASSED_REPORT, "captured": False, "correct": False, "stage": "capture",
              "error": "AcceleratorError: CUDA error: operation failed due to a previous error during capture"}
    res = result(report, returncode=1)
    res.diagnoses, res.located = smoke.explain_failure(res.report, ""), located
    text = smoke.format_result(res)
    assert "located         " in text and "syncs_in_forward.py:14: CG101" in text
    assert "user:    if y.mean().item() > 0:" in text and "fix:     Keep the value as a 0-dim tensor" in text
    assert res.as_dict()["located"]["findings"][0]["line"] == 14


def test_training_recipes_trace_with_their_loss_and_options(tmp_path, models_dir):
    recipe = tmp_path / "train.py"
    recipes.write(recipes.ScaffoldOptions(workflow="callables", mode="training", amp="bf16", optimizer="adamw",
                                          model=f"{models_dir}/tiny_gpt.py:build",
                                          inputs=f"{models_dir}/tiny_gpt.py:example_batch"), recipe)
    command = smoke.trace_command(recipe)
    assert command[command.index("--loss") + 1] == f"{recipe.resolve()}:loss_fn"
    assert command[-4:] == ["--amp", "bf16", "--optimizer", "adamw"]
    te = tmp_path / "te.py"
    recipes.write(recipes.ScaffoldOptions(workflow="te"), te)
    assert smoke.trace_command(te) is None  # TE layers are graphed one by one: not a step trace can build


def test_comparison_with_every_approach_failing_on_a_located_cause_says_fix_it():
    failed = {"captured": False, "correct": False, "graphed_ms": None, "speedup": None,
              "error": "AcceleratorError: operation failed due to a previous error during capture"}
    results = {name: result({**PASSED_REPORT, "workflow": name, **failed}) for name in ("compile", "manual")}
    located = smoke.Located(findings=[{"path": "model.py", "line": 14, "code": "CG101", "name": "tensor-item",
                                       "message": "`.item()` reads a GPU value on the host", "fix": "keep a tensor",
                                       "trace": {"user": {"source": "s = y.item()"}}}])
    comparison = smoke.Comparison(results, located=located, speedup_bound=5.1)
    table = smoke.format_comparison(comparison)
    assert "recommended: fix model.py:14 (CG101 tensor-item), then compare again" in table
    assert "5.1x" in table and "stay eager" not in table
    assert table.count("located: model.py:14") == 2  # under each failed approach
    assert comparison.as_dict()["speedup_bound"] == 5.1
