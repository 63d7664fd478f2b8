"""references/rules.md is generated from the rule data and must stay in step with it."""

from pathlib import Path

from cgkit.check import RULES
from cgkit.check.docs import render_rules_md

RULES_MD = Path(__file__).resolve().parents[2] / "references" / "rules.md"


def test_rules_md_is_up_to_date():
    assert RULES_MD.read_text(encoding="utf-8") == render_rules_md(), (
        "references/rules.md is stale: run `python -m cgkit.check.docs > references/rules.md`"
    )


def test_every_rule_has_an_anchor_and_the_four_headings():
    text = RULES_MD.read_text(encoding="utf-8")
    for rule in RULES.values():
        heading = f"## {rule.code} {rule.name}\n"
        assert heading in text
        section = text.split(heading, 1)[1].split("\n## ", 1)[0]
        for sub in ("### What it does", "### Why is this bad?", "### Example", "### Use instead"):
            assert sub in section, (rule.code, sub)
        assert f"(#{rule.anchor})" in text
