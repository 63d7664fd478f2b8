"""cgkit explain: every known error string maps to its entry; unknown text is "not recognised"."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cgkit import explain
from cgkit.cli import main
from cgkit.knowledge import CHECKLIST, ENTRIES, GROUPS

EXAMPLES = [(e.id, text) for e in ENTRIES for text in e.examples]

# Real messages, as users paste them (with tracebacks and prefixes), and the entry they need.
IN_THE_WILD = [
    (
        "Traceback (most recent call last):\n  File \"train.py\", line 40, in <module>\n"
        "    with torch.cuda.graph(g):\nRuntimeError: CUDA error: operation not permitted when stream is capturing\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
        "cuda-900-capture-unsupported",
    ),
    ("[E] Error Code 1: Cuda Runtime (operation not permitted when stream is capturing)", "cuda-900-capture-unsupported"),
    ("HIP error: capturing stream has unjoined work (hipErrorStreamCaptureUnjoined)", "cuda-904-capture-unjoined"),
    ("Exception: Capture cuda graph failed: CUDA error: operation failed due to a previous error during capture", "cuda-901-capture-invalidated"),
    (
        "W1129 12:00:00.000 torch/_inductor/cudagraph_utils.py:389] [0/0] skipping cudagraphs due to mutated inputs "
        "(2 instances). Found from :\n   File \"model.py\", line 12, in forward",
        "compile-skip-mutated-inputs",
    ),
    ("skipping cudagraphs due to skipping cudagraphs due to cpu device (arg3_1)", "compile-skip-cpu-device"),
    ("RuntimeError: Attempting CUDA graph capture of step() for an instance of Adam but param_groups' capturable is False.", "optimizer-not-capturable"),
    ("pretrain_gpt.py: error: unrecognized arguments: --cuda-graph-num-warmup-steps 2", "mcore-warmup-flag-name"),
    ("[rank0]: UserWarning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead", "nccl-async-error-handling-name"),
]

UNKNOWN = [
    "",
    "hello world",
    "KeyError: 'weight'",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x8 and 16x8)",
    "ModuleNotFoundError: No module named 'transformer_engine'",
    "Segmentation fault (core dumped)",
    "RuntimeError: CUDA error: device-side assert triggered",
    "NCCL WARN Cuda failure 'out of memory'",
    "error 9000: something else entirely",
]


def test_ids_are_unique_and_kebab_case():
    ids = [e.id for e in ENTRIES]
    assert len(ids) == len(set(ids))
    for i in ids:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", i), i


def test_entries_are_complete():
    for e in ENTRIES:
        assert e.group in GROUPS, e.id
        assert e.patterns and e.examples and e.cause and e.fix and e.seen and e.title, e.id
        for p in e.patterns:
            re.compile(p)
        assert "<" not in e.heading or e.heading.count("`") >= 2, e.id


def test_issue_scope_is_covered():
    ids = {e.id for e in ENTRIES}
    for code in range(900, 907):
        assert any(i.startswith(f"cuda-{code}-") for i in ids), code
    for needed in (
        "pinned-copy-during-capture",
        "optimizer-not-capturable",
        "rng-generator-not-registered",
        "rng-current-seed-in-capture",
        "compile-output-overwritten",
        "compile-skip-other",
        "nccl-async-error-handling-name",
        "te-deprecated-fp8-kwargs",
        "mcore-deprecated-enable-cuda-graph",
    ):
        assert needed in ids


@pytest.mark.parametrize("entry_id,text", EXAMPLES, ids=[f"{i}-{n}" for n, (i, _) in enumerate(EXAMPLES)])
def test_each_known_string_maps_to_its_entry_first(entry_id, text):
    found = explain.diagnose(text)
    assert found, text
    assert found[0].id == entry_id, [d.id for d in found]


@pytest.mark.parametrize("text,entry_id", IN_THE_WILD)
def test_real_logs(text, entry_id):
    assert explain.diagnose(text)[0].id == entry_id


@pytest.mark.parametrize("text", UNKNOWN)
def test_unknown_text_is_not_recognised(text):
    assert explain.diagnose(text) == []


def test_diagnosis_fields():
    (d, *_) = explain.diagnose("RuntimeError: Attempt to increase offset for a CUDA generator not in capture mode.")
    assert d.id == "rng-generator-not-registered"
    file_part, _, anchor = d.reference.partition("#")
    assert Path(file_part).is_absolute() and Path(file_part).is_file()  # in the installed bundle, not a checkout
    assert file_part.endswith("references/troubleshooting.md") and anchor
    assert "Attempt to increase offset" in d.matched
    with pytest.raises(AttributeError):
        d.id = "x"  # frozen


def test_cause_ranks_above_the_secondary_error():
    log = (
        "RuntimeError: Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the CPU tensor is pinned.\n"
        "During handling of the above exception, another exception occurred:\n"
        "RuntimeError: CUDA error: operation failed due to a previous error during capture\n"
    )
    assert [d.id for d in explain.diagnose(log)] == ["pinned-copy-during-capture", "cuda-901-capture-invalidated"]


def test_generic_skip_only_without_a_specific_reason():
    assert [d.id for d in explain.diagnose("skipping cudagraphs due to bisector")] == ["compile-skip-other"]
    ids = [d.id for d in explain.diagnose("skipping cudagraphs due to mutated inputs (1 instances)")]
    assert ids == ["compile-skip-mutated-inputs"]


def test_long_lines_are_trimmed_around_the_match():
    text = "x" * 5000 + " operation not permitted when stream is capturing " + "y" * 5000
    (d,) = explain.diagnose(text)
    assert "operation not permitted" in d.matched and len(d.matched) < 400


def test_import_is_torch_free():
    code = "import sys, cgkit.explain, cgkit.knowledge; sys.exit('torch' in sys.modules)"
    import subprocess

    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


# ---------------------------------------------------------------------------- CLI


def test_cli_text():
    result = CliRunner().invoke(main, ["explain", "CUDA error: capturing stream has unjoined work"])
    assert result.exit_code == 0
    assert "[cuda-904-capture-unjoined]" in result.output and "fix:" in result.output
    assert "references/troubleshooting.md#" in result.output


def test_cli_json():
    result = CliRunner().invoke(main, ["explain", "--json", "grad requires non-empty inputs."])
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["recognised"] is True
    assert data["diagnoses"][0]["id"] == "graphed-callables-grad-empty-inputs"
    assert set(data["diagnoses"][0]) >= {"id", "title", "cause", "fix", "reference", "matched"}


def test_cli_unknown_is_honest():
    result = CliRunner().invoke(main, ["explain", "KeyError: 'weight'"])
    assert result.exit_code == 1
    assert "not recognised" in result.output
    assert CHECKLIST[0] in result.output
    data = json.loads(CliRunner().invoke(main, ["explain", "--json", "KeyError: 'weight'"]).output)
    assert data == {"recognised": False, "diagnoses": [], "checklist": list(CHECKLIST)}


def test_cli_stdin_and_log_file(tmp_path):
    log = "step 1\nRuntimeError: This CUDAGraph instance already owns a captured graph. To capture a new graph, create a new instance.\n"
    result = CliRunner().invoke(main, ["explain"], input=log)
    assert result.exit_code == 0 and "cuda-graph-already-captured" in result.output
    result = CliRunner().invoke(main, ["explain", "-"], input=log)
    assert result.exit_code == 0 and "cuda-graph-already-captured" in result.output
    path = tmp_path / "train.log"
    path.write_text(log)
    result = CliRunner().invoke(main, ["explain", str(path), "--json"])
    assert json.loads(result.output)["diagnoses"][0]["id"] == "cuda-graph-already-captured"


def test_cli_usage_errors():
    assert CliRunner().invoke(main, ["explain", "   "]).exit_code == 2
    assert CliRunner().invoke(main, ["explain", "--list", "x"]).exit_code == 2


def test_cli_list():
    result = CliRunner().invoke(main, ["explain", "--list"])
    assert result.exit_code == 0
    assert all(e.id in result.output for e in ENTRIES)
    data = json.loads(CliRunner().invoke(main, ["explain", "--list", "--json"]).output)
    assert [d["id"] for d in data] == [e.id for e in ENTRIES]


def test_a_missing_log_file_is_a_usage_error_not_unrecognised_text(tmp_path):
    from click.testing import CliRunner

    from cgkit.cli import main

    result = CliRunner().invoke(main, ["explain", str(tmp_path / "trian.log")])
    assert result.exit_code == 2 and "no such log file" in result.output
    log = tmp_path / "train.log"
    log.write_text("RuntimeError: CUDA error: operation not permitted when stream is capturing\n")
    assert CliRunner().invoke(main, ["explain", str(log)]).exit_code == 0


def test_the_original_error_of_a_log_wins_over_lines_cgkit_printed():
    """A log with smoke's summary (which quotes a generic 901) and the script's own traceback: the
    script's first real error comes first."""
    log = "\n".join([
        "cgkit smoke: manual (inference) - graphed.py on NVIDIA H200, torch 2.11.0",
        "  error           AcceleratorError: CUDA error: operation failed due to a previous error during capture",
        "  cause           A secondary error: an earlier call invalidated the capture",
        '{"workflow": "manual", "error": "operation failed due to a previous error during capture"}',
        "Traceback (most recent call last):",
        '  File "train.py", line 12, in <module>',
        "RuntimeError: Attempting CUDA graph capture of step() for an instance of Adam but param_groups' "
        "capturable is False.",
    ])
    original, ours = explain.split_cgkit_lines(log)
    assert "Attempting CUDA graph capture" in original and "cgkit smoke" in ours and "Traceback" in original
    found = explain.diagnose(log)
    assert found[0].id == "optimizer-not-capturable"
    assert "cuda-901-capture-invalidated" in [d.id for d in found]  # still listed, after the original
