"""`cgkit trace` on models: each hazard found at its line (the user's and the library's), with its code;
clean models (an MLP, a ConvNet with BatchNorm, a transformer that passes its causal flag, dict
outputs) give no finding, in inference and in training. On the CPU, standing in for the GPU."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="cgkit trace runs the step: it needs torch")

import re
from pathlib import Path

import pytest

from cgkit.errors import CgkitError
from cgkit.trace import StepFailed, TraceOptions, trace_step

MODELS = Path(__file__).resolve().parent.parent / "models"
FILE = MODELS / "trace_models.py"


def _marked() -> dict[str, tuple[str, int]]:
    """factory name -> (code, line) from the `# HAZARD CODE` comments of trace_models.py."""
    lines = FILE.read_text().splitlines()
    marks, classes = {}, {}
    current = None
    for number, line in enumerate(lines, 1):
        found = re.match(r"class (\w+)\(", line)
        if found:
            current = found.group(1)
        hazard = re.search(r"# HAZARD (CG\d{3})", line)
        if hazard:
            classes[current] = (hazard.group(1), number)
    for number, line in enumerate(lines, 1):
        factory = re.match(r"def (\w+)\(\):", line)
        if factory:
            body = lines[number] if number < len(lines) else ""
            made = re.search(r"return (\w+)\(\)", body)
            if made and made.group(1) in classes:
                marks[factory.group(1)] = classes[made.group(1)]
    return marks


HAZARDS = _marked()
INPUTS = {"masked_transformer": "sequence", "padded_encoder": "padded_sequence", "packed_lstm": "short_sequences"}
# The record of cgkit.knowledge.LIBRARY_CALLS each library hazard must carry (its fix names the argument).
LIBRARY_CALL = {"masked_transformer": "nn-transformer-causal-mask", "padded_encoder": "nn-transformer-nested-fast-path",
                "one_hot": "one-hot-num-classes", "policy": "distribution-validate-args",
                "packed_lstm": "pack-padded-sequence-lengths"}


def run(factory: str, inputs: str = "batch", **options):
    return trace_step(TraceOptions(model=f"{FILE}:{factory}", inputs=f"{FILE}:{inputs}", device="cpu", **options))


def test_every_marked_hazard_has_a_factory():
    assert set(HAZARDS) >= {"item_sync", "data_dependent_shape", "pageable_copy", "host_random", "tensor_branch",
                            "changing_scalar", "python_random", "masked_transformer"}


@pytest.mark.parametrize(("factory", "inputs"), [("mlp", "batch"), ("convnet", "images"),
                                                 ("causal_transformer", "sequence"), ("dict_outputs", "batch")])
@pytest.mark.parametrize("mode", ["inference", "training"])
def test_clean_models_give_no_finding(factory, inputs, mode):
    result = run(factory, inputs, mode=mode)
    assert not result.errors
    assert [(f.code, f.line, f.message) for f in result.findings] == []
    assert result.operators >= 5, "the step ran and its operators were recorded"


@pytest.fixture
def distributions_validate():
    """torch.distributions validate their arguments by default, until Dynamo runs in the process: its
    TorchPatcher turns validation off for good. Other tests compile; set the default back for this one."""
    import torch

    before = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(True)
    yield
    torch.distributions.Distribution.set_default_validate_args(before)


@pytest.mark.parametrize("factory", sorted(HAZARDS))
def test_each_hazard_is_found_at_its_user_line(factory, distributions_validate):
    code, line = HAZARDS[factory]
    result = run(factory, INPUTS.get(factory, "batch"))
    found = [(f.code, f.line) for f in result.findings]
    assert (code, line) in found, found
    finding = next(f for f in result.findings if (f.code, f.line) == (code, line))
    assert finding.path.endswith("trace_models.py")
    assert finding.trace["user"]["line"] == line and finding.trace["user"]["source"]
    assert finding.severity == "error"
    assert finding.trace["calls"] == ["call 2", "call 3"] or finding.trace["calls"] == ["call 3"]
    if factory in LIBRARY_CALL:
        assert finding.trace["library_call"]["id"] == LIBRARY_CALL[factory]
        assert factory == "one_hot" or finding.trace["library"]["path"].startswith("torch/")


def test_one_hot_with_num_classes_is_clean():
    """The CPU kernel of one_hot reads its input either way; the CUDA kernel only without num_classes
    (cgkit.trace.ops.CUDA_READS_ONLY_IF): the CPU trace says what the GPU would do."""
    assert run("one_hot_sized").findings == []


def test_a_hazard_inside_torch_nn_names_the_library_line_and_the_argument_that_avoids_it():
    result = run("masked_transformer", "sequence")
    (finding,) = result.findings
    library = finding.trace["library"]
    assert library["path"].endswith("torch/nn/modules/transformer.py")
    assert library["function"].endswith("_detect_is_causal_mask")
    assert "mask == causal_comparison" in library["source"]
    assert any(step["function"].endswith("TransformerEncoder.forward") for step in finding.trace["chain"])
    assert finding.trace["library_call"]["id"] == "nn-transformer-causal-mask"
    assert "is_causal=True" in finding.fix


def test_a_step_that_is_all_library_code_falls_back_to_the_factory_line():
    result = run("bare_encoder", "encoder_inputs")
    (finding,) = result.findings
    assert finding.trace["user"] is None and "library code" in finding.trace["user_note"]
    assert finding.line == FILE.read_text().splitlines().index("def bare_encoder():") + 1
    assert finding.trace["library"]["function"].endswith("_detect_is_causal_mask")


def test_a_python_branch_and_a_changing_number_are_reported_once():
    branch = run("tensor_branch")
    assert [f.code for f in branch.findings] == ["CG201"], "the branch's new path is the sync's consequence"
    scalar = run("changing_scalar")
    (finding,) = scalar.findings
    assert finding.code == "CG404" and "on call 2" in finding.message and "on call 3" in finding.message


def test_the_workflow_sets_the_severity():
    result = run("item_sync", workflow="compile")
    severities = {f.code: f.severity for f in result.findings}
    assert severities.get("CG101") == "warning"  # a graph break under torch.compile, not a failure


def test_a_step_that_raises_is_a_clear_error_with_its_line(tmp_path):
    script = tmp_path / "broken_step.py"
    script.write_text("import torch\n\n\ndef step(x):\n    return x @ torch.ones(3, 5)  # wrong shape\n\n\n"
                      "def inputs():\n    return (torch.randn(2, 4),)\n")
    with pytest.raises(StepFailed, match=r"broken_step.py:5 .*mat1 and mat2"):
        trace_step(TraceOptions(step=f"{script}:step", inputs=f"{script}:inputs", device="cpu"))


def test_a_user_step_is_traced_through_its_optimizer(tmp_path):
    script = tmp_path / "own_step.py"
    script.write_text(
        "import torch\n\n"
        "model = torch.nn.Linear(8, 8)\n"
        "opt = torch.optim.Adam(model.parameters(), lr=1e-3)\n\n\n"
        "def train_step(x):\n"
        "    opt.zero_grad(set_to_none=True)\n"
        "    model(x).square().mean().backward()\n"
        "    opt.step()\n\n\n"
        "def batch():\n    return (torch.randn(4, 8),)\n")
    result = trace_step(TraceOptions(step=f"{script}:train_step", inputs=f"{script}:batch", device="cpu"))
    codes = {(f.code, f.line) for f in result.findings}
    assert ("CG502", 10) in codes, codes  # Adam without capturable=True, at the opt.step() line


def test_usage_errors_before_anything_runs():
    with pytest.raises(CgkitError, match="give --model and --inputs"):
        trace_step(TraceOptions(device="cpu"))
    with pytest.raises(CgkitError, match="--step runs your own step"):
        trace_step(TraceOptions(step="a.py:f", model="a.py:m", device="cpu"))
    with pytest.raises(CgkitError, match="at least 3"):
        trace_step(TraceOptions(model=f"{FILE}:mlp", inputs=f"{FILE}:batch", calls=2, device="cpu"))
    with pytest.raises(CgkitError, match="file not found"):
        trace_step(TraceOptions(model="nowhere.py:build", inputs="nowhere.py:x", device="cpu"))
