"""Suppression comments.

* ``# noqa`` on the reported line (or the first line of its statement): every code there;
* ``# noqa: CG101, CG2`` there: those codes (or prefixes);
* ``# cgkit: noqa`` anywhere in a file, on its own line: the whole file;
* ``# cgkit: noqa: CG101, CG4``: those codes in the whole file.

A code list that cannot be parsed (``# noqa: item``, ``# noqa:``) suppresses nothing: a typo must
never widen into "ignore everything".
"""

from __future__ import annotations

import re

_LINE = re.compile(r"#\s*noqa(?P<sep>\s*:\s*(?P<codes>[^#]*))?", re.IGNORECASE)
_FILE = re.compile(r"^\s*#\s*cgkit\s*:\s*noqa(?P<sep>\s*:\s*(?P<codes>[^#\n]*))?\s*$", re.IGNORECASE | re.MULTILINE)
_CODE = re.compile(r"[A-Z]+[0-9]+")
_SPLIT = re.compile(r"[,\s]+")

ALL = "ALL"


def parse_codes(text: str | None) -> tuple[str, ...] | None:
    """``"CG101, CG2 trailing words"`` -> ("CG101", "CG2"); None when no valid code starts the list."""
    if text is None:
        return None
    codes = []
    for token in _SPLIT.split(text.strip()):
        if not token:
            continue
        if _CODE.fullmatch(token):
            codes.append(token)
        else:
            break  # the list ends at the first thing that is not a code (ruff's rule)
    return tuple(codes) or None


def line_directive(line: str):
    """What a ``# noqa`` comment on this line suppresses: ALL, a tuple of codes (maybe empty), or None."""
    if "#" not in line:
        return None
    match = _LINE.search(line)
    if match is None:
        return None
    if match.group("sep") is None:
        nxt = line[match.end() : match.end() + 1]
        if nxt.isalnum() or nxt == "_":  # a word that merely starts with noqa is no directive
            return None
        return ALL
    return parse_codes(match.group("codes")) or ()


def file_directives(text: str):
    """(blanket, codes) from ``# cgkit: noqa`` lines of a file."""
    if "cgkit" not in text:
        return False, ()
    blanket = False
    codes: list[str] = []
    for match in _FILE.finditer(text):
        if match.group("sep") is None:
            blanket = True
        else:
            parsed = parse_codes(match.group("codes"))
            if parsed:
                codes.extend(parsed)
    return blanket, tuple(codes)


def matches(code: str, codes) -> bool:
    return any(code == c or (code.startswith(c) and len(c) < len(code)) for c in codes)


class Suppressions:
    """Per-file cache of the directives, looked up only for lines that have findings."""

    def __init__(self, text: str, lines: list[str]):
        self.lines = lines
        self.blanket, self.file_codes = file_directives(text)

    def suppressed(self, code: str, lines: tuple[int, ...]) -> bool:
        if self.blanket or (self.file_codes and matches(code, self.file_codes)):
            return True
        for line in lines:
            if 1 <= line <= len(self.lines):
                directive = line_directive(self.lines[line - 1])
                if directive is ALL:
                    return True
                if directive and matches(code, directive):
                    return True
        return False
