"""The lines of torch's source that cgkit's references and library advice rest on are still there
(benchmarks/source_facts.py; run there against torch 2.11 on the GPU machine too)."""

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("source_facts", ROOT / "benchmarks" / "source_facts.py")
source_facts = importlib.util.module_from_spec(spec)
sys.modules["source_facts"] = source_facts
spec.loader.exec_module(source_facts)


@pytest.mark.parametrize("fact", sorted(source_facts.FACTS))
def test_fact_holds_in_the_installed_torch(fact):
    result = source_facts.check(fact)
    if result["found"] is None:  # a compiled-library fact, and this torch is a CPU build
        pytest.skip(result["where"])
    assert result["found"], result["where"]


def test_absent_facts_are_library_texts():
    # "Gone" is only meaningful for an exact message in a compiled library, not for a regex over Python.
    for fact in source_facts.ABSENT:
        assert source_facts.FACTS[fact][0].startswith("lib:"), fact


def test_a_removed_check_reads_as_holding(tmp_path, monkeypatch):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libtorch_cuda.so").write_bytes(b"\0set_current_seed can be called during stream capture only if new seed "
                                           b"is the same\0Cannot call CUDAGeneratorImpl::clone_impl\0")
    monkeypatch.setattr(source_facts, "_torch_dir", lambda: tmp_path)
    assert source_facts.check("rng-current-seed-check-gone")["found"] is True
    assert source_facts.check("rng-new-seed-refused")["found"] is True
    (lib / "libtorch_cuda.so").write_bytes(b"\0Cannot call CUDAGeneratorImpl::current_seed\0")
    assert source_facts.check("rng-current-seed-check-gone")["found"] is False
    assert source_facts.check("rng-new-seed-refused")["found"] is False


def test_json_leaves_uncheckable_facts_out_of_the_holding_list(capsys):
    import json

    source_facts.main(["--json"])
    report = json.loads(capsys.readouterr().out)
    assert all(f["found"] is not None for f in report["facts"])
    assert {f["id"] for f in report["facts"]} | {f["id"] for f in report["skipped"]} == set(source_facts.FACTS)


def test_every_library_call_record_is_guarded_by_a_source_fact():
    from cgkit.knowledge import LIBRARY_CALLS

    # one_hot is C++ (aten): its behaviour is guarded by a trace test instead (tests/trace).
    unguarded = {r.id for r in LIBRARY_CALLS} - set(source_facts.FACTS) - {"one-hot-num-classes"}
    assert not unguarded, unguarded
