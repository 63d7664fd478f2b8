"""Facts the references state about Transformer Engine, Megatron-Core and torch, checked in their
source: the wheels in ../shared/wheels (read with `ast` and text, never imported) and the installed
torch. Each test names the reference line it guards."""

from __future__ import annotations

import ast
import re
import zipfile

import pytest
from docs_util import REFERENCES, ROOT, code_blocks

WHEELS = ROOT.parent / "shared" / "wheels"


def _wheel_text(pattern: str, member: str) -> str:
    found = sorted(WHEELS.glob(pattern)) if WHEELS.is_dir() else []
    if not found:
        pytest.skip(f"no {pattern} in {WHEELS}")
    with zipfile.ZipFile(found[-1]) as whl:
        return whl.read(member).decode()


def test_te_signature_in_the_reference_has_the_wheels_order():
    """api-te-megatron.md: `make_graphed_callables(...)`, the parameters in graph.py's order."""
    source = _wheel_text("transformer_engine-2.*-py3-none-any.whl", "transformer_engine/pytorch/graph.py")
    fn = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "make_graphed_callables")
    actual = [a.arg for a in fn.args.args]
    block = next(b for b in code_blocks(REFERENCES / "api-te-megatron.md") if b.text.startswith("make_graphed_callables("))
    text = re.sub(r"#.*", "", block.text)
    documented = re.findall(r"(?:^|[(,])\s*(\w+)\s*(?==|,|\))", text.split("(", 1)[1].rsplit(")", 1)[0] + ")")
    assert documented == actual


def test_megatron_thread_local_capture_is_limited_to_some_graphs():
    """api-pytorch.md, capture_error_mode: thread_local for the full-iteration graph and the per-layer
    forward graphs; per-layer backward and optimizer graphs use the default."""
    layers = _wheel_text("megatron_core-0.19.*.whl", "megatron/core/transformer/cuda_graphs.py")
    full = _wheel_text("megatron_core-0.19.*.whl", "megatron/core/full_cuda_graph.py")
    optimizer = _wheel_text("megatron_core-0.19.*.whl", "megatron/core/optimizer/optimizer_cuda_graph.py")
    assert 'capture_error_mode="thread_local"' in full
    assert re.search(r"self\.fwd_graph, pool=self\.mempool, capture_error_mode=\"thread_local\"", layers)
    assert "torch.cuda.graph(self.bwd_graph, pool=self.mempool):" in layers
    assert "capture_error_mode" not in optimizer


def test_megatron_fsdp_graph_mode():
    """api-te-megatron.md and api-pytorch.md (FSDP2): Megatron-FSDP's graph-safe mode."""
    training = _wheel_text("megatron_core-0.19.*.whl", "megatron/training/training.py")
    assert 'if args.use_megatron_fsdp and args.cuda_graph_impl != "none":' in training
    assert 'kwargs["megatron_fsdp_cuda_graph_mode"] = True' in training
    assert 'kwargs["fsdp_all_gather_in_start_param_sync"] = False' in training


def test_megatron_nccl_graph_register_with_expandable_segments():
    """api-pytorch.md (collectives) and api-te-megatron.md (TECudaGraphHelper)."""
    layers = _wheel_text("megatron_core-0.19.*.whl", "megatron/core/transformer/cuda_graphs.py")
    assert "expandable_segments:True" in layers and 'os.getenv("NCCL_GRAPH_REGISTER", "") == "0"' in layers


def test_optimizer_device_list_example_is_what_torch_prints():
    """troubleshooting.md, optimizer-capturable-device: the example's device list."""
    pytest.importorskip("torch")
    from torch.optim.optimizer import _get_capturable_supported_devices

    from cgkit.explain import entry

    example = entry("optimizer-capturable-device").examples[0]
    assert example.endswith(f"must be on supported devices: {_get_capturable_supported_devices()}.")


def test_graphed_callables_empty_grad_example_is_what_torch_raises():
    """troubleshooting.md, graphed-callables-grad-empty-inputs: torch's current wording comes first."""
    torch = pytest.importorskip("torch")
    from cgkit.explain import entry

    w = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError) as info:
        torch.autograd.grad(outputs=((w * 2).sum(),), inputs=())
    assert entry("graphed-callables-grad-empty-inputs").examples[0] == f"RuntimeError: {info.value}"


def test_every_library_call_in_the_table_has_a_trace_record():
    """patterns-compatibility.md's table and troubleshooting.md's records name the same calls."""
    from cgkit.knowledge import LIBRARY_CALLS

    table = (REFERENCES / "patterns-compatibility.md").read_text().split("## Library calls and the argument", 1)[1]
    for needle, record in (("is_causal", "nn-transformer-causal-mask"), ("enable_nested_tensor", "nn-transformer-nested-fast-path"),
                           ("num_classes", "one-hot-num-classes"), ("momentum=None", "batchnorm-momentum-none"),
                           ("error_if_nonfinite", "clip-grad-error-if-nonfinite"),
                           ("validate_args", "distribution-validate-args"), ("_maybe_opt_step", "grad-scaler-step")):
        assert needle in table, needle
        assert any(r.id == record for r in LIBRARY_CALLS), record


def test_skill_facts_gpu_script_is_self_contained():
    """benchmarks/skill_facts_gpu.py runs on the GPU machine without cgkit: torch and the standard
    library only, one JSON line per fact."""
    path = ROOT / "benchmarks" / "skill_facts_gpu.py"
    tree = ast.parse(path.read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert "cgkit" not in imported
    assert imported <= {"torch", "json", "os", "subprocess", "sys", "time", "socket", "tempfile", "gc",
                        "__future__", "contextlib", "random", "cuda"}, imported
    facts = next(n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "FACTS")
    names = {k.value for k in facts.value.keys}
    for needed in ("rng-get-state-in-capture", "rng-new-seed-in-capture", "rng-clone-state-in-capture",
                   "pool-sharing-order", "pinned-alloc-in-capture", "cudagraph-trees-memory-per-shape",
                   "mark-static-address", "all-reduce-in-capture", "keep-graph-instantiate",
                   "grad-scaler-fused-in-capture", "batchnorm-momentum-none-in-capture"):
        assert needed in names, needed


def test_references_name_only_facts_the_gpu_script_has():
    """A reference that sends the reader to `benchmarks/skill_facts_gpu.py` (`fact`) names a real fact."""
    path = ROOT / "benchmarks" / "skill_facts_gpu.py"
    tree = ast.parse(path.read_text())
    facts = next(n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "FACTS")
    names = {k.value for k in facts.value.keys}
    for doc in (*REFERENCES.glob("*.md"), ROOT / "SKILL.md"):
        for m in re.finditer(r"skill_facts_gpu\.py`\s*\(`([a-z0-9-]+)`", " ".join(doc.read_text().split())):
            assert m.group(1) in names, f"{doc.name}: {m.group(1)}"
