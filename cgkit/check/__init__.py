"""``cgkit check``: a region-aware static checker for CUDA-graph capture hazards.

A hazard matters only where code runs inside a captured region, so the checker first finds the
regions (``torch.cuda.graph``, ``capture_begin``/``capture_end``, ``torch.compile`` with a CUDA-graph
mode, ``make_graphed_callables``, declared regions), then follows calls out of them and reports what
it finds along the way, with the chain of calls that leads there.

Usage from Python::

    from cgkit.check import check_paths
    result = check_paths(["train.py"])
    for finding in result.findings:
        print(finding.path, finding.line, finding.code, finding.message)

Nothing here imports torch: the checker reads source with :mod:`ast` only.
"""

from cgkit.check.engine import check_paths, check_source, expand_codes
from cgkit.check.model import CATEGORIES, CheckResult, Finding, Rule
from cgkit.check.rules import RULES, RULES_BY_NAME


def get_rule(code_or_name: str) -> Rule | None:
    key = code_or_name.strip()
    return RULES.get(key.upper()) or RULES_BY_NAME.get(key.lower())


__all__ = [
    "CATEGORIES",
    "RULES",
    "RULES_BY_NAME",
    "CheckResult",
    "Finding",
    "Rule",
    "check_paths",
    "check_source",
    "expand_codes",
    "get_rule",
]
