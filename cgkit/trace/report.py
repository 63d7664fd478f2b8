"""Observations -> findings in ``cgkit check``'s vocabulary (one set of rule codes for both tools).

A finding is placed at the user's line (the line to change) and carries the library line where the
operation ran, the library calls between the two, and which calls saw it. Its fix is the rule's, or,
where a library call is the cause and an argument avoids it, that advice from
:data:`cgkit.knowledge.LIBRARY_CALLS` (the same data ``cgkit explain`` reads).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cgkit import explain
from cgkit.check.model import CheckResult, Finding, kind_class
from cgkit.check.rules import RULES
from cgkit.trace.frames import Location, Site, short_path

# Placeholders some rule messages use besides {what}; trace fills them with neutral words.
_MESSAGE_DEFAULTS = {"detail": "", "line": "?", "how": "replaced", "cls": "Adam", "problem": "not joined"}


@dataclass
class TraceResult(CheckResult):
    """Findings of one trace, with what was traced (for the summary line and the JSON report)."""

    scope: str = ""
    device: str = ""
    calls: int = 0
    operators: int = 0  # operators in one recorded call
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def scope_text(self) -> str:
        return self.scope

    def to_dict(self) -> dict:
        return {"scope": self.scope, "device": self.device, "calls": self.calls, "operators": self.operators,
                "seconds": round(self.seconds, 3), "notes": self.notes}


def finding(code: str, what: str, location: Location, fallback: Site, region: dict, klass: str, calls: list[str],
            operation: str = "", earlier: Location | None = None, apis: tuple[str, ...] = (),
            message: str | None = None, **args) -> Finding | None:
    """One finding, or None when the rule has no severity for this kind of region.

    ``message`` replaces the rule's message where that speaks of static context a run does not have
    (the line an optimizer was created at, say)."""
    library_sites = [s for s in (location.library, *reversed(location.chain)) if s is not None]
    advice = explain.library_call([(s.path, s.function) for s in library_sites], list(apis))
    if advice is not None and advice.rule:
        code = advice.rule  # the library call is the cause: its rule names it best
    rule = RULES[code]
    severity = rule.severity(klass)
    if severity is None:
        return None
    user = location.user or fallback
    values = {**_MESSAGE_DEFAULTS, "what": what, **args}
    fix = advice.fix if advice else _format(rule.fix, values)
    trace = {
        "operation": operation,
        "calls": calls,
        "user": _site(location.user),
        "library": _site(location.library),
        "chain": [_site(s) for s in location.chain],
    }
    if location.user is None:
        trace["user_note"] = f"no line of your code is on the stack: the step ({region['name']}) is library code"
    if earlier is not None:
        trace["earlier"] = {"user": _site(earlier.user), "library": _site(earlier.library)}
    if advice:
        trace["library_call"] = {"id": advice.id, "title": advice.title, "cause": advice.cause,
                                 "reference": explain.library_call_reference(advice)}
    return Finding(
        path=short_path(user.path), line=user.line, col=user.col, end_line=user.line, end_col=user.col,
        code=code, name=rule.name, category=rule.category_for(klass), severity=severity,
        message=message or rule.render_message(klass, values), fix=fix, region=region,
        chain=[{"name": s.function, "line": s.line, "path": short_path(s.path)} for s in library_sites[::-1]],
        url=rule.url, trace=trace,
    )


def _site(site: Site | None) -> dict | None:
    if site is None:
        return None
    data = site.to_dict()
    data["path"] = short_path(site.path)
    return data


def _format(template: str, values: dict) -> str:
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError):
        return template


def merge(findings: list[Finding]) -> list[Finding]:
    """One finding per rule, user line and library line; the calls that saw it are listed together."""
    merged: dict[tuple, Finding] = {}
    for f in findings:
        library = (f.trace or {}).get("library") or {}
        key = (f.code, f.path, f.line, library.get("path"), library.get("line"))
        if key in merged:
            calls = merged[key].trace["calls"]
            calls.extend(c for c in f.trace["calls"] if c not in calls)
        else:
            merged[key] = f
    return sorted(merged.values(), key=lambda f: (_SEVERITY_ORDER.get(f.severity, 9), f.path, f.line, f.code))


_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


def klass_for(workflow: str | None) -> str:
    """Severity class of a traced step: ``compile`` for torch.compile, else manual capture."""
    return "compile" if workflow == "compile" else kind_class("torch.cuda.graph")
