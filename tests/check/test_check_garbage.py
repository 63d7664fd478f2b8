"""A finished check leaves no cyclic garbage: its syntax trees are freed by reference counting.

Modules, their functions, classes and facts point at each other while a check runs; if those ties
survive the check, millions of syntax-tree objects wait for the cyclic collector (14 s at exit on the
standard library, benchmarks/CHECK_SPEED.md)."""

import gc
from pathlib import Path

from cgkit.check import check_paths
from cgkit.check.config import Config

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_a_check_leaves_no_cyclic_garbage():
    check_paths([str(FIXTURES)], config=Config())  # warm-up: imports and caches of the first run
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        result = check_paths([str(FIXTURES)], config=Config())
        assert result.findings and result.regions
        del result
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        ours = [o for o in gc.garbage if type(o).__module__.startswith(("cgkit", "ast"))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()
    assert ours == [], f"{len(ours)} objects of cgkit's in reference cycles, e.g. {type(ours[0]).__name__}"
