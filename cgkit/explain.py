"""Error text -> cause, fix and reference section (``cgkit explain``).

The knowledge lives in :mod:`cgkit.knowledge`; this module matches it against text and renders
``references/troubleshooting.md`` from the same records, so the two cannot drift. Torch-free.

Regenerate the reference after editing the knowledge::

    python -m cgkit.explain --write
"""

from __future__ import annotations

import re
import sys
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

from cgkit.errors import CgkitError
from cgkit.knowledge import CHECKLIST, ENTRIES, GROUPS, LIBRARY_CALLS, Entry, LibraryCall

_LOG_SUFFIXES = (".log", ".txt", ".out", ".err")

TROUBLESHOOTING = "references/troubleshooting.md"  # in the skill bundle (`cgkit skill path`)
_MAX_MATCHED = 240  # characters of the matched line kept in a Diagnosis


@dataclass(frozen=True)
class Diagnosis:
    """One recognised error: what it is, why it happens, what to do, where to read more."""

    id: str
    title: str
    cause: str
    fix: str
    reference: str  # absolute path + anchor: <bundle>/references/troubleshooting.md#...
    matched: str  # the line of the input that matched

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading (lowercase, punctuation dropped, spaces -> '-')."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def section_heading(entry: Entry) -> str:
    """The troubleshooting.md heading of an entry: its id, then the error text it covers."""
    return f"{entry.id}: {entry.heading}"


@cache
def troubleshooting_path() -> str:
    """The troubleshooting reference of this cgkit's installed bundle, as an absolute path (a pip
    user has no checkout: the relative ``references/...`` would name nothing on their disk)."""
    from cgkit.bundle import reference

    return reference(TROUBLESHOOTING)


def reference(entry: Entry) -> str:
    return f"{troubleshooting_path()}#{github_anchor(section_heading(entry))}"


def library_call_reference(record: LibraryCall) -> str:
    return f"{troubleshooting_path()}#{github_anchor(f'{record.id}: {record.title}')}"


@cache
def _compiled() -> tuple[tuple[Entry, tuple[re.Pattern[str], ...]], ...]:
    return tuple((e, tuple(re.compile(p, re.IGNORECASE) for p in e.patterns)) for e in ENTRIES)


def _line_at(text: str, start: int, end: int) -> str:
    lo = text.rfind("\n", 0, start) + 1
    hi = text.find("\n", end)
    line = text[lo : hi if hi != -1 else len(text)].strip()
    if len(line) > _MAX_MATCHED:
        # Keep the match in view: cut around it.
        offset = max(0, start - lo - 40)
        line = ("..." if offset else "") + line[offset : offset + _MAX_MATCHED] + "..."
    return line


# Lines cgkit printed itself (smoke's summary, trace's and explain's output, a recipe's JSON report): a
# log that holds them and the original error is explained by the original first.
_CGKIT_LINE = re.compile(
    r"^(?:cgkit (?:smoke|trace|check|explain)\b"
    r"|\{\"workflow\""
    r"|\S+:\d+:\d+: CG\d{3} \["
    r"|\[[a-z0-9-]+\] "
    r"|\s+(?:error|failed while|cause|fix|see|located|user|library|via|seen|why|before|matched|read)\b:?\s)"
)


def split_cgkit_lines(text: str) -> tuple[str, str]:
    """(the original text, the lines cgkit printed) of a log."""
    original, ours = [], []
    for line in text.splitlines():
        (ours if _CGKIT_LINE.match(line) else original).append(line)
    return "\n".join(original), "\n".join(ours)


def diagnose(text: str) -> list[Diagnosis]:
    """Every known error found in ``text``, best match first; an empty list when none is known.

    The original errors of a log come first; what matches only in lines cgkit printed itself (a
    smoke summary, a recipe's report) follows. Within each, more specific records first (a
    secondary error such as 901 ranks below the error that caused it), then the earliest in the
    text. A fallback record (the generic "skipping cudagraphs due to ...") only appears when no
    other record of its group matched.
    """
    original, ours = split_cgkit_lines(text)
    first = _diagnose(original)
    seen = {d.id for d in first}
    return first + [d for d in _diagnose(ours) if d.id not in seen]


def _diagnose(text: str) -> list[Diagnosis]:
    found: list[tuple[Entry, int, str]] = []
    for entry, patterns in _compiled():
        first = None
        for pattern in patterns:
            match = pattern.search(text)
            if match and (first is None or match.start() < first.start()):
                first = match
        if first is not None:
            found.append((entry, first.start(), _line_at(text, first.start(), first.end())))
    specific_groups = {e.group for e, _, _ in found if not e.fallback}
    found = [f for f in found if not (f[0].fallback and f[0].group in specific_groups)]
    found.sort(key=lambda f: (-f[0].rank, f[1]))
    return [
        Diagnosis(id=e.id, title=e.title, cause=e.cause, fix=e.fix, reference=reference(e), matched=matched)
        for e, _, matched in found
    ]


def library_call(frames: list[tuple[str, str]], apis: list[str] = ()) -> LibraryCall | None:
    """The library-call record for an operation that ran in these library frames ((path, function),
    innermost first) or under these torch APIs; None when no record covers it."""
    for record in LIBRARY_CALLS:
        for where in record.where:
            if where.startswith("api:"):
                if where[4:] in apis:
                    return record
                continue
            suffix, _, function = where.rpartition(":")
            for path, name in frames:
                if path.replace("\\", "/").endswith(suffix) and (name == function or name.endswith("." + function)):
                    return record
    return None


def entry(entry_id: str) -> Entry:
    for e in ENTRIES:
        if e.id == entry_id:
            return e
    raise KeyError(entry_id)


# ---------------------------------------------------------------------------- formatting


def format_text(diagnoses: list[Diagnosis]) -> str:
    if not diagnoses:
        lines = [
            "not recognised: cgkit has no entry for this error (it does not guess).",
            "",
            "General checklist for CUDA-graph failures:",
        ]
        lines += [f"  {i}. {item}" for i, item in enumerate(CHECKLIST, 1)]
        lines += ["", f"All known errors: {troubleshooting_path()} (or `cgkit explain --list`)."]
        return "\n".join(lines) + "\n"
    out = []
    for i, d in enumerate(diagnoses):
        if i:
            out.append("")
        out += [
            f"[{d.id}] {d.title}",
            f"  matched: {d.matched}",
            f"  cause:   {d.cause}",
            f"  fix:     {d.fix}",
            f"  read:    {d.reference}",
        ]
    return "\n".join(out) + "\n"


def as_json(diagnoses: list[Diagnosis]) -> dict:
    return {
        "recognised": bool(diagnoses),
        "diagnoses": [d.to_dict() for d in diagnoses],
        "checklist": [] if diagnoses else list(CHECKLIST),
    }


# ---------------------------------------------------------------------------- troubleshooting.md

_PREAMBLE = """\
# Troubleshooting CUDA graphs: error messages, causes, fixes

<!-- Generated from cgkit/knowledge.py by `python -m cgkit.explain --write`. Do not edit by hand. -->

Where these facts come from: every message below was read in the library source or in real
output: PyTorch 2.13 (installed source) and 2.11 (the wheel, and runs on an H200), Transformer
Engine 2.20.2 and Megatron-Core 0.19.2 (wheel source), the CUDA runtime's error strings, and
public issue threads where noted. Each section says where its message comes from (**Seen in**)
and what changed across versions (**Changed**).

Use it from the command line, with the same data:

```bash
cgkit explain "CUDA error: operation not permitted when stream is capturing"
cgkit explain train.log --json
```

Find a message here with grep: `grep -n "capturable is False" references/troubleshooting.md`.
Each heading is `id: message`, the id being what `cgkit explain` prints.

## If the error is not listed: general checklist
"""


def render_troubleshooting() -> str:
    """The full text of references/troubleshooting.md."""
    parts = [_PREAMBLE]
    parts += [_wrap(f"{i}. {item}", "   ") for i, item in enumerate(CHECKLIST, 1)]
    parts.append("\n## Index\n")
    parts.append('Each id starts its section\'s heading: `grep -n "^### ID:" references/troubleshooting.md`.\n')
    for group, title in GROUPS.items():
        parts.append(f"- **{title}**")
        parts += [f"  - `{e.id}`: {e.title}" for e in ENTRIES if e.group == group]
    parts.append("- **Library calls that break capture**")
    parts += [f"  - `{r.id}`: {r.title}" for r in LIBRARY_CALLS]
    for group, title in GROUPS.items():
        parts.append(f"\n## {title}\n")
        for e in (e for e in ENTRIES if e.group == group):
            parts.append(f"### {section_heading(e)}\n")
            parts.append(f"{_wrap(e.title)}\n")
            parts.append(_wrap(f"- **Cause**: {e.cause}"))
            parts.append(_wrap(f"- **Fix**: {e.fix}"))
            parts.append(_wrap(f"- **Seen in**: {e.seen}"))
            if e.changed:
                parts.append(_wrap(f"- **Changed**: {e.changed}"))
            if e.see:
                links = ", ".join(f"[{_link_text(s)}]({s})" for s in e.see)
                parts.append(_wrap(f"- **Read more**: {links}"))
            parts.append("- **Example**:\n")
            parts.append("```text")
            parts.append(e.examples[0])  # the message as printed, on one line, so grep finds it whole
            parts.append("```\n")
    parts.append(_LIBRARY_PREAMBLE)
    for record in LIBRARY_CALLS:
        parts.append(f"### {record.id}: {record.title}\n")
        parts.append(_wrap(f"- **Cause**: {record.cause}"))
        parts.append(_wrap(f"- **Fix**: {record.fix}"))
        parts.append(_wrap(f"- **Seen in**: {record.seen}"))
        if record.rule:
            parts.append(f"- **Rule**: {record.rule} (`cgkit rule {record.rule}`)")
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"


_WIDTH = 100
# A continuation line must not start with what Markdown reads as a new block (a list item, a quote,
# a heading, a table row): such a word stays at the end of the line before it.
_BLOCK_START = re.compile(r"^(?:[-+*>|#=]|\d+[.)]$|```)")


def _wrap(text: str, indent: str = "  ") -> str:
    """One Markdown paragraph or list item, folded at spaces to about ``_WIDTH`` characters."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > _WIDTH and not _BLOCK_START.match(word):
            lines.append(line)
            line = indent + word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return "\n".join(lines)


_LIBRARY_PREAMBLE = """
## Library calls that break capture

`cgkit trace` runs the step and names the library line where an operation a graph cannot hold ran;
when that line is one of these, the finding carries the fix below (the argument that avoids it).
Each was read in the library's source (**Seen in**) and found by `cgkit trace`.
"""


def _link_text(target: str) -> str:
    path, _, anchor = target.partition("#")
    return f"{path} ({anchor.replace('-', ' ')})" if anchor else path


def _main(argv: list[str]) -> int:
    from cgkit.bundle import bundle_root

    path = Path(bundle_root()) / TROUBLESHOOTING
    if argv[:1] == ["--write"]:
        path.write_text(render_troubleshooting())
        print(f"wrote {path}")
        return 0
    if argv[:1] == ["--check"]:
        if not path.is_file() or path.read_text() != render_troubleshooting():
            print(f"{path} is stale: run `python -m cgkit.explain --write`", file=sys.stderr)
            return 1
        return 0
    print("usage: python -m cgkit.explain --write | --check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))


def read_error_text(arg: str | None, stdin) -> str:
    """The text to explain: ``arg`` itself, the log file it names, or ``stdin`` (None or ``-``).

    A single word that looks like a file name but names no file is an error, not text to match:
    `cgkit explain trian.log` must not answer "not recognised" about the word "trian.log".
    """
    if arg is None or arg == "-":
        text = stdin.read()
    elif "\n" not in arg and len(arg) < 4096 and Path(arg).is_file():
        text = Path(arg).read_text(errors="replace")
    elif " " not in arg.strip() and ("/" in arg or arg.lower().endswith(_LOG_SUFFIXES)):
        raise CgkitError(f"no such log file: {arg}")
    else:
        text = arg
    if not text.strip():
        raise CgkitError("the error text is empty")
    return text
