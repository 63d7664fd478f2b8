"""Render the rule reference (``references/rules.md``) from the rule data.

Regenerate with::

    python -m cgkit.check.docs > references/rules.md

A test compares the file with :func:`render_rules_md`, so the reference cannot drift from the code.
"""

from __future__ import annotations

import json
import sys

from cgkit.check.model import CATEGORIES, Rule
from cgkit.check.rules import FAMILIES, RULES

_FAMILY_TITLES = {
    "sync": "CG1xx: host synchronization",
    "dynamic": "CG2xx: dynamic control flow and shapes",
    "memory": "CG3xx: transfers and memory",
    "replay": "CG4xx: silent replay hazards",
    "setup": "CG5xx: API configuration",
    "streams": "CG6xx: streams",
    "runtime": "CG7xx: found only by running the step (`cgkit trace`)",
    "tool": "CG9xx: files that could not be checked",
}


def _sev(value: str | None) -> str:
    return value or "-"


def severity_line(rule: Rule) -> str:
    parts = []
    if rule.manual:
        parts.append(f"{rule.manual} under manual capture")
    if rule.compile:
        parts.append(f"{rule.compile} under `torch.compile`")
    if rule.manual:
        parts.append("info in candidate regions")
    return ", ".join(parts)


def rule_markdown(rule: Rule, heading_level: int = 2) -> str:
    h = "#" * heading_level
    sub = "#" * (heading_level + 1)
    lines = [
        f"{h} {rule.code} {rule.name}",
        "",
        f"Category: `{rule.category}`"
        + (f" (`{rule.compile_category}` under `torch.compile`)" if rule.compile_category else "")
        + f". Severity: {severity_line(rule)}.",
        "",
        f"Message: {rule.message}",
        "",
        f"{sub} What it does",
        "",
        rule.what,
        "",
        f"{sub} Why is this bad?",
        "",
        rule.why,
        "",
        f"{sub} Example",
        "",
        "```python",
        rule.example.rstrip("\n"),
        "```",
        "",
        f"{sub} Use instead",
        "",
        "```python",
        rule.use_instead.rstrip("\n"),
        "```",
        "",
        f"Fix: {rule.fix}",
    ]
    return "\n".join(lines) + "\n"


def rule_table(as_json: bool = False) -> str:
    """What `cgkit rules` prints: one line per rule (code, name, category, severities), or JSON."""
    if as_json:
        rows = [{"code": r.code, "name": r.name, "category": r.category, "manual": r.manual,
                 "compile": r.compile, "url": r.url} for r in RULES.values()]
        return json.dumps(rows, indent=2) + "\n"
    header = ("code", "name", "category", "manual capture", "torch.compile")
    rows = [header, *((r.code, r.name, r.category, _sev(r.manual), _sev(r.compile)) for r in RULES.values())]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    return "".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + f"  {row[-1]}\n"
                   for row in rows)


def render_rules_md() -> str:
    out = [
        "# cgkit check: rules",
        "",
        "<!-- Generated from cgkit/check/rules/*.py by `python -m cgkit.check.docs > references/rules.md`.",
        "     Do not edit by hand: tests/check/test_check_docs.py fails when this file is out of date. -->",
        "",
        "`cgkit check PATH...` reports these hazards only where code runs inside a captured region",
        "(`torch.cuda.graph`, `capture_begin`/`capture_end`, `make_graphed_callables`, `torch.compile`",
        "with a CUDA-graph mode, or a region you declare with `--region`), following calls out of it.",
        "Severity depends on the region: under manual capture a hazard fails capture or replays wrong",
        "(`error`); under `torch.compile` it usually costs a graph break or an uncaptured partition",
        "(`warning`); in a script with no region yet, `nn.Module.forward` methods and training-step",
        "functions are checked as candidates and findings are `info`.",
        "",
        "Calls are followed into the project's functions, methods and modules whose type the code shows",
        "(constructors, annotations, the arguments callers pass). Where an object's type is not shown, the",
        "checker reads the file it is in: an untyped model that is called, compiled or graphed is taken for",
        "each `nn.Module` that file defines; a method called on a part the object holds (`self.attn.plan()`,",
        "`cb.on_step_end()` for `cb` in `self.callbacks`) for the file's one class with that method, or for",
        "each override in one class hierarchy. A local of unknown type, and a method name that library",
        "objects have too (`step`, `update`, `get`...), are not guessed at. Loops over a module list",
        "(`for block in self.blocks`, `zip(self.attn, self.norms)`, `enumerate(...)`) reach its class, and a",
        "callable handed to a capturing helper (a function, a lambda, a `functools.partial`, also through",
        "helpers that pass it on) is followed at each call site. Reading a property runs its getter; a",
        "function decorated by the file's own decorator runs the decorator's wrapper; a call through a",
        "dispatch table (`TRANSFORMS[name](x)`, a dict the file fills by name or with a registering",
        "decorator, `self.stages[...]`) reaches every function the table holds; a method called on one of",
        "the file's classes reaches the overrides its subclasses in that file define. The chain under each",
        "finding names the functions it went through. A block that builds a value once and keeps it",
        "(`if self._mask is None: self._mask = ...`) runs on the first call only, the warm-up or the call a",
        "compile traces, and is not checked; a capture with no warm-up before it is CG508's business.",
        "",
        "Suppress one finding with `# noqa: CG101` on its line, a file with `# cgkit: noqa` or",
        "`# cgkit: noqa: CG4` on a line of its own, or configure `[tool.cgkit]` in pyproject.toml.",
        "",
        f"Categories: {', '.join(f'`{c}`' for c in CATEGORIES)}.",
        "",
        "| Code | Name | Category | Manual capture | torch.compile |",
        "|---|---|---|---|---|",
    ]
    for rule in RULES.values():
        out.append(
            f"| [{rule.code}](#{rule.anchor}) | {rule.name} | {rule.category} | {_sev(rule.manual)} | {_sev(rule.compile)} |"
        )
    out.append("")
    for family in FAMILIES:
        title = _FAMILY_TITLES.get(family.__name__.rsplit(".", 1)[-1], family.__name__)
        out.append(f"# {title}")
        out.append("")
        for rule in family.RULES:
            out.append(rule_markdown(rule))
    return "\n".join(out).rstrip("\n") + "\n"


def main() -> None:
    sys.stdout.write(render_rules_md())


if __name__ == "__main__":
    main()
