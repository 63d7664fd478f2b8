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
    assert result["found"], result["where"]


def test_every_library_call_record_is_guarded_by_a_source_fact():
    from cgkit.knowledge import LIBRARY_CALLS

    # one_hot is C++ (aten): its behaviour is guarded by a trace test instead (tests/trace).
    unguarded = {r.id for r in LIBRARY_CALLS} - set(source_facts.FACTS) - {"one-hot-num-classes"}
    assert not unguarded, unguarded
