"""Output formats: one list of findings, four renderings (text, json, sarif, github)."""

from __future__ import annotations

import json

from cgkit import __version__
from cgkit.check.docs import rule_markdown
from cgkit.check.model import CheckResult, Finding
from cgkit.check.rules import RULES

FORMATS = ("text", "json", "sarif", "github")
_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
_GITHUB_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}
# No informationUri / helpUri: cgkit has no public home whose address has been checked, and a
# link nobody verified is worse than none. Each rule's full documentation travels in the SARIF
# itself (help.markdown), and `cgkit rule CODE` prints it.


def render(result: CheckResult, fmt: str) -> str:
    if fmt == "text":
        return text(result)
    if fmt == "json":
        return to_json(result)
    if fmt == "sarif":
        return sarif(result)
    if fmt == "github":
        return github(result)
    raise ValueError(f"unknown format {fmt!r}")


def _location(f: Finding) -> str:
    if f.cell is not None:
        return f"{f.path}:cell {f.cell}:{f.line}:{f.col}"
    return f"{f.path}:{f.line}:{f.col}"


def text(result: CheckResult) -> str:
    out = []
    for f in result.findings:
        out.append(f"{_location(f)}: {f.code} [{f.severity}] {f.message}")
        if f.trace is not None:
            out.extend(trace_lines(f))
        else:
            chain = f.chain_text()
            if chain:
                out.append(f"  region: {chain}")
        out.append(f"  fix: {f.fix}")
    counts = {}
    for f in result.findings:
        counts[f.severity] = counts.get(f.severity, 0) + 1
    if result.findings:
        summary = ", ".join(f"{n} {sev}" for sev, n in sorted(counts.items(), key=lambda kv: ("error", "warning", "info").index(kv[0])))
        out.append(f"Found {len(result.findings)} finding(s) ({summary}) in {result.scope_text}.")
    elif result.errors:
        out.append(f"No finding, but nothing is cleared: {result.scope_text} did not run to the end (see the error).")
    else:
        out.append(f"All clear: no capture hazards found in {result.scope_text}.")
    return "\n".join(out) + "\n"


def _site_text(site: dict) -> str:
    where = f"{site['path']}:{site['line']}"
    if site.get("function") and site["function"] != "<module>":
        where += f" in {site['function']}"
    return f"{where}: {site['source']}" if site.get("source") else where


def trace_lines(f: Finding) -> list[str]:
    """What `cgkit trace` adds under a finding: the user line, then the library line, and the calls."""
    trace = f.trace
    lines = []
    if trace.get("user"):
        lines.append(f"  user:    {_site_text(trace['user'])}")
    elif trace.get("user_note"):
        lines.append(f"  user:    ({trace['user_note']})")
    if trace.get("chain"):
        lines.append("  via:     " + " -> ".join(f"{s['function']} ({s['path']}:{s['line']})" for s in trace["chain"]))
    if trace.get("library"):
        lines.append(f"  library: {_site_text(trace['library'])}")
    earlier = trace.get("earlier") or {}
    if earlier.get("user") and earlier["user"] != trace.get("user"):
        lines.append(f"  before:  {_site_text(earlier['user'])}")
    operation = trace.get("operation")
    calls = ", ".join(trace.get("calls", []))
    if operation or calls:
        lines.append(f"  seen:    {operation}" + (f" ({calls})" if calls else ""))
    if trace.get("library_call"):
        lines.append(f"  why:     {trace['library_call']['cause']}")
    return lines


def to_json(result: CheckResult) -> str:
    data = {
        "version": __version__,
        "files": result.files,
        "findings": [f.to_dict() for f in result.findings],
        "errors": list(result.errors),
    }
    return json.dumps(data, indent=2) + "\n"


def sarif(result: CheckResult) -> str:
    used = sorted({f.code for f in result.findings})
    rules = [_sarif_rule(RULES[code]) for code in sorted(RULES)]
    index = {code: i for i, code in enumerate(sorted(RULES))}
    results = []
    for f in result.findings:
        if f.cell is not None:  # a notebook: the lines of its JSON (columns there are not the cell's)
            region = {"startLine": f.file_line or 1, "endLine": f.file_end_line or f.file_line or 1}
        else:
            region = {"startLine": f.line, "startColumn": f.col, "endLine": f.end_line, "endColumn": f.end_col}
        entry = {
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": _SARIF_LEVEL[f.severity],
            "message": {"text": f.message},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": f.path.replace("\\", "/")}, "region": region}}],
            "properties": {"category": f.category, "fix": f.fix, "region": f.region, "chain": f.chain},
        }
        if f.cell is not None:
            entry["properties"].update(cell=f.cell, lineInCell=f.line, columnInCell=f.col)
        if f.trace is not None:
            entry["properties"]["trace"] = f.trace
            library = f.trace.get("library")
            if library:
                entry["relatedLocations"] = [{
                    "id": 1,
                    "message": {"text": f"where it ran: {library.get('function', '')}"},
                    "physicalLocation": {"artifactLocation": {"uri": library["path"].replace("\\", "/")},
                                         "region": {"startLine": library["line"]}},
                }]
        results.append(entry)
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "cgkit",
                        "version": __version__,
                        "rules": rules,
                    }
                },
                "results": results,
                "invocations": [
                    {
                        "executionSuccessful": not result.errors,
                        "toolExecutionNotifications": [{"level": "error", "message": {"text": e}} for e in result.errors],
                    }
                ],
                "properties": {"rulesUsed": used},
            }
        ],
    }
    return json.dumps(doc, indent=2) + "\n"


def _sarif_rule(rule) -> dict:
    level = rule.manual or rule.compile or "warning"
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.what},
        "fullDescription": {"text": rule.why},
        "help": {"text": rule.fix, "markdown": rule_markdown(rule, heading_level=2)},
        "defaultConfiguration": {"level": _SARIF_LEVEL[level]},
        "properties": {"category": rule.category, "severity": {"manual": rule.manual, "compile": rule.compile}},
    }


def _esc_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _esc_prop(value: str) -> str:
    return _esc_data(value).replace(":", "%3A").replace(",", "%2C")


def github(result: CheckResult) -> str:
    out = []
    for f in result.findings:
        if f.cell is not None:  # a notebook: GitHub shows the .ipynb file, so the line of its JSON
            where = [f"line={f.file_line or 1}", f"endLine={f.file_end_line or f.file_line or 1}"]
        else:
            where = [f"line={f.line}", f"col={f.col}", f"endLine={f.end_line}", f"endColumn={f.end_col}"]
        props = ",".join(
            [
                f"file={_esc_prop(f.path)}",
                *where,
                f"title={_esc_prop(f'cgkit {f.code} ({f.name})')}",
            ]
        )
        message = f"{f.code} {f.message}"
        if f.cell is not None:
            message = f"cell {f.cell}, line {f.line}: {message}"
        chain = f.chain_text() if f.trace is None else ""
        if chain:
            message += f"\nregion: {chain}"
        if f.trace is not None:
            message += "".join(f"\n{line.strip()}" for line in trace_lines(f))
        message += f"\nfix: {f.fix}"
        out.append(f"::{_GITHUB_LEVEL[f.severity]} {props}::{_esc_data(message)}")
    for error in result.errors:
        out.append(f"::error title=cgkit internal error::{_esc_data(error)}")
    return "\n".join(out) + ("\n" if out else "")
