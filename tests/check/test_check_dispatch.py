"""Rules are units (a record with its matchers); the dispatcher runs only the selected ones, once per node."""

from cgkit.check import RULES, check_source
from cgkit.check.rules import FAMILIES, Dispatch, dispatch

ENGINE_REPORTED = {"CG901", "CG902"}  # file problems: the engine reports them while reading


def _codes(d: Dispatch) -> set[str]:
    tables = [*d.methods.values(), *d.any_methods.values(), *d.quals.values(), d.qualified, d.every_call,
              *d.each.values(), d.body, d.region]
    return {code for table in tables for code, _ in table}


def test_every_rule_check_reports_has_a_matcher_in_its_own_family_module():
    for family in FAMILIES:
        for rule in family.RULES:
            if not rule.static or rule.code in ENGINE_REPORTED:
                assert not rule.matchers, rule.code
                continue
            assert rule.matchers, f"{rule.code} has no matcher"
            for _trigger, matcher in rule.matchers:
                assert matcher.__module__ == family.__name__, (rule.code, matcher.__module__)


def test_only_the_selected_rules_matchers_are_in_the_tables():
    assert _codes(dispatch(frozenset({"CG101", "CG404"}))) == {"CG101", "CG404"}
    everything = _codes(dispatch(None))
    assert everything == {code for code, rule in RULES.items() if rule.matchers}


def test_precedence_is_data():
    source = "import torch\nx = torch.ones(2, device='cuda')\ng = torch.cuda.CUDAGraph()\nwith torch.cuda.graph(g):\n    print(x)\n"
    codes = [f.code for f in check_source(source).findings]
    assert "CG106" in codes and "CG401" not in codes  # print of a tensor: CG106 says more
    assert RULES["CG401"].yields_to == ("CG106",)
    alone = [f.code for f in check_source(source, select=["CG401"]).findings]
    assert alone == ["CG401"]  # with CG106 not selected, the print is still host code
