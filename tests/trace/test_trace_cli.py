"""`cgkit trace` from the command line: formats, exit statuses, usage errors, scripts with arguments."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="cgkit trace runs the step: it needs torch")

import json
from pathlib import Path

from click.testing import CliRunner

from cgkit.cli import main

MODELS = Path(__file__).resolve().parent.parent / "models"
FILE = MODELS / "trace_models.py"


def invoke(*args):
    return CliRunner().invoke(main, ["trace", *args])


def test_findings_exit_1_with_user_and_library_lines():
    result = invoke("--model", f"{FILE}:masked_transformer", "--inputs", f"{FILE}:sequence", "--device", "cpu")
    assert result.exit_code == 1, result.output
    assert "CG103 [error]" in result.output
    assert "  user:    " in result.output and "  library: " in result.output
    assert "transformer.py" in result.output and "is_causal=True" in result.output
    assert "on the CPU (standing in for the GPU)" in result.output


def test_clean_exits_0_and_exit_zero_keeps_findings_at_0():
    assert invoke("--model", f"{FILE}:mlp", "--inputs", f"{FILE}:batch", "--device", "cpu").exit_code == 0
    result = invoke("--model", f"{FILE}:item_sync", "--inputs", f"{FILE}:batch", "--device", "cpu", "--exit-zero")
    assert result.exit_code == 0 and "CG101" in result.output


def test_json_carries_the_trace_of_each_finding():
    result = invoke("--model", f"{FILE}:item_sync", "--inputs", f"{FILE}:batch", "--device", "cpu", "--format", "json")
    data = json.loads(result.output)
    (finding,) = data["findings"]
    assert finding["code"] == "CG101" and finding["trace"]["operation"].startswith("aten._local_scalar_dense")
    assert finding["trace"]["user"]["source"].startswith("scale = y.abs().max().item()")


def test_sarif_and_github_formats():
    sarif = json.loads(invoke("--model", f"{FILE}:item_sync", "--inputs", f"{FILE}:batch", "--device", "cpu",
                              "--format", "sarif").output)
    assert sarif["runs"][0]["results"][0]["ruleId"] == "CG101"
    github = invoke("--model", f"{FILE}:item_sync", "--inputs", f"{FILE}:batch", "--device", "cpu", "--format", "github")
    assert github.output.startswith("::error file=") and "line=82" in github.output


def test_a_script_runs_with_its_own_arguments(tmp_path):
    script = tmp_path / "capture.py"
    script.write_text(
        "import sys\nimport torch\n\n"
        "scale = float(sys.argv[1])\n"
        "x = torch.ones(4, device='cuda')\n"
        "g = torch.cuda.CUDAGraph()\n"
        "with torch.cuda.graph(g):\n"
        "    y = x * scale\n"
        "    z = y.sum().item()\n")
    result = invoke(str(script), "--device", "cpu", "--", "2.5")
    assert result.exit_code == 1, result.output
    assert "capture.py:9:" in result.output and "CG101" in result.output


def test_usage_errors_exit_2():
    assert invoke("--device", "cpu").exit_code == 2  # nothing to trace
    missing = invoke("nowhere.py", "--device", "cpu")
    assert missing.exit_code == 2 and "no such script" in missing.output
    both = invoke(str(FILE), "--model", f"{FILE}:mlp")
    assert both.exit_code == 2 and "SCRIPT is traced as it runs" in both.output
    assert invoke("--model", f"{FILE}:mlp", "--inputs", f"{FILE}:batch", "--workflow", "nope").exit_code == 2
    bad_ref = invoke("--model", f"{FILE}:nothing", "--inputs", f"{FILE}:batch", "--device", "cpu")
    assert bad_ref.exit_code == 2 and "defines no top-level 'nothing'" in bad_ref.output


def test_a_step_that_raises_exits_2_with_its_line(tmp_path):
    script = tmp_path / "raises.py"
    script.write_text("import torch\n\n\ndef step():\n    raise ValueError('broken on purpose')\n")
    result = invoke("--step", f"{script}:step", "--device", "cpu")
    assert result.exit_code == 2 and "raises.py:5" in result.output and "broken on purpose" in result.output


def test_json_stays_parseable_when_the_script_prints(tmp_path):
    script = tmp_path / "noisy.py"
    script.write_text("import torch\nprint('hello from the script')\nx = torch.ones(4, device='cuda')\n"
                      "g = torch.cuda.CUDAGraph()\nwith torch.cuda.graph(g):\n    print(x * 2)\n")
    result = CliRunner().invoke(main, ["trace", str(script), "--device", "cpu", "--format", "json"])
    data = json.loads(result.stdout)
    assert [f["code"] for f in data["findings"]] == ["CG106"]
    assert "hello from the script" in result.stderr


def test_a_region_that_raises_keeps_its_findings_with_a_note(tmp_path):
    script = tmp_path / "raises_in_region.py"
    script.write_text("import torch\nx = torch.ones(4, device='cuda')\ng = torch.cuda.CUDAGraph()\n"
                      "with torch.cuda.graph(g):\n    n = x.sum().item()\n    raise RuntimeError('as capture would')\n")
    result = invoke(str(script), "--device", "cpu")
    assert result.exit_code == 1, result.output
    assert "raises_in_region.py:5:" in result.output and "CG101" in result.output
    assert "note: the script stopped inside the capture region at line 4" in result.output


def test_what_the_users_model_prints_stays_off_a_json_report(tmp_path):
    """nanoGPT's constructor prints its parameter count: smoke, which reads trace's JSON to locate a
    failed capture, found only that text (H200 run of benchmarks/real_models_smoke.py)."""
    import subprocess
    import sys

    model = tmp_path / "chatty.py"
    model.write_text(
        "import torch\n\n"
        "def build():\n"
        "    print('number of parameters: 0.92M')\n"
        "    return torch.nn.Linear(4, 4)\n\n"
        "def batch():\n"
        "    print('making a batch')\n"
        "    return (torch.randn(2, 4),)\n"
    )
    done = subprocess.run([sys.executable, "-m", "cgkit", "trace", "--model", f"{model}:build", "--inputs",
                           f"{model}:batch", "--device", "cpu", "--format", "json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["findings"] == []
    assert "number of parameters" in done.stderr and "making a batch" in done.stderr
