"""The data the checker works with: rules, regions, findings.

Everything here is plain data; the analysis lives in the other modules of :mod:`cgkit.check`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import NamedTuple

SEVERITIES = ("error", "warning", "info")
SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}

CATEGORIES = (
    "host-sync",
    "host-code",
    "dynamic-control-flow",
    "dynamic-shape",
    "python-scalar",
    "static-address",
    "rng",
    "autocast-cache",
    "pinned-memory",
    "stream",
    "optimizer",
    "api-misuse",
    "compile",
)

# Region kinds, and the class that decides a rule's severity.
MANUAL_KINDS = ("torch.cuda.graph", "capture_begin", "make_graphed_callables", "te.make_graphed_callables", "declared")
COMPILE_KINDS = ("torch.compile",)
CANDIDATE_KIND = "candidate"

RULES_DOC = "references/rules.md"  # in the skill bundle (`cgkit skill path`)


@cache
def rules_doc_path() -> str:
    """The rule reference of this cgkit's installed bundle, as an absolute path (what a finding's
    ``url`` names: a pip user has no checkout where ``references/rules.md`` would be)."""
    from cgkit.bundle import reference

    return reference(RULES_DOC)


def kind_class(kind: str) -> str:
    """``manual`` (capture fails or replays wrong), ``compile`` (graph break / partition) or ``candidate``."""
    if kind in COMPILE_KINDS:
        return "compile"
    if kind == CANDIDATE_KIND:
        return "candidate"
    return "manual"


@dataclass(frozen=True)
class Rule:
    """One check: identity, wording, severities per region class, and its documentation.

    ``example`` and ``use_instead`` are complete, runnable programs: the fixture tests check that
    the first is reported and the second is not, and the GPU test runs both under real capture.
    ``gpu_check`` is Python run after the program; it must set ``ok`` (True = replayed right).
    """

    code: str
    name: str
    category: str
    message: str  # what is wrong, under manual capture; may use {fields} of the hazard
    fix: str
    what: str
    why: str
    example: str
    use_instead: str
    manual: str | None = "error"  # severity under torch.cuda.graph / capture_begin / make_graphed_callables
    compile: str | None = "warning"  # severity under torch.compile(mode="reduce-overhead"/"max-autotune")
    compile_message: str | None = None
    # The category under torch.compile when the hazard is a different one there (printing a tensor:
    # a host sync in a capture, a graph break, host code, in a compiled function).
    compile_category: str | None = None
    gpu_check: str = "ok = True"
    gpu_skip: str | None = None  # why the GPU test cannot show the hazard, if it cannot
    # The exception the example raises on a GPU when it is one the GPU test would otherwise take for a
    # mistake in the program itself (a TypeError from a call the API refuses).
    fails_with: str | None = None
    # How `cgkit trace` finds the example's hazard at run time: "script" (`cgkit trace EXAMPLE.py`),
    # "compile-step" (`cgkit trace --workflow compile --step EXAMPLE.py:step --inputs EXAMPLE.py:inputs`),
    # or None with ``trace_blind`` saying why a run cannot show it.
    trace: str | None = "script"
    trace_blind: str | None = None
    # False for rules only a run can find (the CG7xx family): cgkit check never reports them.
    static: bool = True
    # The matchers: pairs of what the rule listens to (a trigger of cgkit.check.rules._base) and the
    # function that decides, yielding Found. Empty for rules no matcher reports (file problems, run-time rules).
    matchers: tuple[tuple[object, Callable], ...] = ()
    # Rules that report the same node better: when one of them does, this one stays silent.
    yields_to: tuple[str, ...] = ()

    @property
    def anchor(self) -> str:
        return f"{self.code.lower()}-{self.name}"

    @property
    def url(self) -> str:
        return f"{rules_doc_path()}#{self.anchor}"

    def category_for(self, klass: str) -> str:
        return self.compile_category if klass == "compile" and self.compile_category else self.category

    def severity(self, klass: str) -> str | None:
        if klass == "candidate":
            return "info" if self.manual is not None else None
        return self.compile if klass == "compile" else self.manual

    def render_message(self, klass: str, args: dict) -> str:
        template = self.compile_message if klass == "compile" and self.compile_message else self.message
        try:
            text = template.format(**args)
        except (KeyError, IndexError, ValueError):
            text = template
        if klass == "candidate":
            text = f"would block capture: {text}"
        return text


class Found(NamedTuple):
    """What a matcher yields: the node to report, and the values the rule's message needs."""

    node: object
    stmt: object = None  # the statement holding the node (its first line also takes a noqa)
    args: dict | None = None
    on_input: str | None = None  # only where this parameter holds an input of the region's callable
    module: object = None  # region matchers: the ModuleIndex the node belongs to (default: the region's)
    chain: tuple = ()  # region matchers: the calls from the region to the node's function


def found(node, stmt=None, *, on_input: str | None = None, module=None, chain=(), **args) -> Found:
    return Found(node, stmt, args, on_input, module, tuple(chain))


class Hazard(NamedTuple):
    """A Found with the code of the rule that found it (function level)."""

    code: str
    node: object
    args: dict
    on_input: str | None = None
    stmt: object = None


class RegionHazard(NamedTuple):
    """A Found with its rule's code, from the code around a region (what happens before and after it)."""

    code: str
    module: object
    node: object
    args: dict
    chain: tuple = ()


@dataclass
class Finding:
    path: str
    line: int
    col: int
    end_line: int
    end_col: int
    code: str
    name: str
    category: str
    severity: str
    message: str
    fix: str
    region: dict | None = None  # {"kind", "line", "name", "path"}
    chain: list[dict] = field(default_factory=list)  # [{"name", "line", "path", "call_line"}]
    url: str = ""
    cell: int | None = None  # notebooks: 1-based code cell; line is then the line within the cell
    # notebooks: the lines of the .ipynb file (its JSON) that hold line and end_line (annotations go there)
    file_line: int | None = None
    file_end_line: int | None = None
    # cgkit trace: the operation, the library line where it ran, the calls that saw it (see cgkit.trace.report)
    trace: dict | None = None

    def sort_key(self):
        return (self.path, self.cell or 0, self.line, self.col, self.code)

    def chain_text(self) -> str:
        if not self.region:
            return ""
        parts = [f"{self.region['name']} at {self._where(self.region)}"]
        for step in self.chain:
            parts.append(f"{step['name']} {self._where(step)}")
        return " -> ".join(parts)

    def _where(self, site: dict) -> str:
        """``L12`` in the finding's own file; ``other.py:12`` in another (a chain may cross files)."""
        cell = f"cell {site['cell']}:" if site.get("cell") is not None else ""
        path = site.get("path")
        if path is None or path == self.path:
            return f"{cell}L{site['line']}"
        return f"{path}:{cell}{site['line']}"

    def to_dict(self) -> dict:
        data = {
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "end_line": self.end_line,
            "end_col": self.end_col,
            "code": self.code,
            "name": self.name,
            "category": self.category,
            "severity": self.severity,
            "message": self.message,
            "fix": self.fix,
            "region": self.region,
            "chain": self.chain,
            "url": self.url,
        }
        if self.cell is not None:
            data["cell"] = self.cell
            data["file_line"] = self.file_line
            data["file_end_line"] = self.file_end_line
        if self.trace is not None:
            data["trace"] = self.trace
        return data


@dataclass
class CheckResult:
    findings: list[Finding]
    errors: list[str]  # internal errors (the checker's own bugs); never user hazards
    files: int = 0
    lines: int = 0
    regions: list[dict] = field(default_factory=list)  # capture sites analysed, with the functions followed

    @property
    def scope_text(self) -> str:
        """What was looked at, for the summary line."""
        return f"{self.files} file(s)"

    @property
    def exit_code(self) -> int:
        if self.errors:
            return 2
        return 1 if any(f.severity in ("error", "warning") for f in self.findings) else 0
