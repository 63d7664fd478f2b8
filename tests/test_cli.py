"""The command line: help, version, scaffold to stdout and files, and usage errors (exit 2)."""

import subprocess
import sys

from click.testing import CliRunner
from conftest import MODELS

from cgkit import __version__, recipes
from cgkit.cli import main

GPT = MODELS / "tiny_gpt.py"


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def test_version_and_help_explain_each_command_with_an_example():
    assert __version__ in invoke("--version").output
    top = invoke("--help")
    assert top.exit_code == 0
    for command in ("scaffold", "smoke", "check", "rules", "rule", "explain"):
        assert command in top.output
        text = invoke(command, "--help").output
        assert "Examples:" in text and f"cgkit {command}" in text


def test_python_dash_m_runs_the_same_cli():
    done = subprocess.run([sys.executable, "-m", "cgkit", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and __version__ in done.stdout


def test_scaffold_list_names_every_workflow_with_one_line():
    out = invoke("scaffold", "--list").output.splitlines()
    assert [line.split()[0] for line in out] == list(recipes.WORKFLOWS)


def test_scaffold_to_stdout_and_to_a_file(tmp_path):
    result = invoke("scaffold", "--workflow", "manual")
    assert result.exit_code == 0 and "torch.cuda.graph(graph, stream=stream)" in result.output
    out = tmp_path / "graphed.py"
    result = invoke("scaffold", "-w", "manual", "--mode", "training", "--model", f"{GPT}:build",
                    "--inputs", f"{GPT}:example_batch", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "def make_graphed_training" in out.read_text()


def test_scaffold_refuses_to_overwrite_without_force(tmp_path):
    out = tmp_path / "train.py"
    out.write_text("# my own training script\n")
    result = invoke("scaffold", "-w", "manual", "-o", str(out))
    assert result.exit_code == 2 and "already exists; pass --force" in result.output
    assert out.read_text() == "# my own training script\n"
    assert invoke("scaffold", "-w", "manual", "-o", str(out), "--force").exit_code == 0


def test_usage_errors_exit_2_with_a_message():
    cases = [
        (["scaffold"], "--workflow is required"),
        (["scaffold", "-w", "nope"], "unknown workflow 'nope'"),
        (["scaffold", "-w", "compile", "--buckets", "1,2"], "does not take --buckets"),
        (["scaffold", "-w", "manual", "--mode", "fast"], "Invalid value for '--mode'"),
        (["scaffold", "-w", "manual", "--model", "missing.py:build", "--inputs", "missing.py:x"], "file not found"),
        (["scaffold", "-w", "manual", "--model", "my_model.py::build", "--inputs", "my_model.py:example_batch"],
         "a REF is path/to/file.py:name or package.module:name, with one ':' before the name"),
        (["smoke"], "give exactly one of"),
        (["smoke", "--compare", "--fp8", "delayed"], "none takes --fp8"),
        (["smoke", "does_not_exist.py"], "does not exist"),
    ]
    for args, message in cases:
        result = invoke(*args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output, (args, result.output)


def test_smoke_without_a_gpu_exits_2_and_says_why(tmp_path):
    recipe = tmp_path / "r.py"
    recipes.write(recipes.ScaffoldOptions(workflow="manual"), recipe)
    done = subprocess.run([sys.executable, "-m", "cgkit", "smoke", str(recipe)], capture_output=True, text=True)
    if "NVIDIA" in done.stdout:  # a GPU is present: covered by the gpu tests
        return
    assert done.returncode == 2
    assert "no CUDA device" in done.stderr or "torch is not installed" in done.stderr
