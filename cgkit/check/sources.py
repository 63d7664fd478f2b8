"""Reading what the user points at: Python files (any declared encoding) and notebooks."""

from __future__ import annotations

import bisect
import io
import json
import os
import re
import tokenize
from dataclasses import dataclass

_MAGIC = re.compile(r"^\s*[%!?]")
# What `cgkit check` reads: Python files and notebooks; a file without a suffix is a script when its
# first line runs Python (``#!/usr/bin/env python3``).
PYTHON_SUFFIXES = (".py", ".pyw")
NOTEBOOK_SUFFIX = ".ipynb"
CHECKED_SUFFIXES = (*PYTHON_SUFFIXES, NOTEBOOK_SUFFIX)
_PYTHON_SHEBANG = re.compile(rb"^#![^\n]*\bpython")


def is_python_file(path: str) -> bool:
    """A file ``cgkit check`` reads when it is named: .py, .pyw, .ipynb, or a script with no suffix whose
    first line runs Python. Anything else named explicitly (README.md, a .txt) is a usage error."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix in CHECKED_SUFFIXES:
        return True
    if suffix:
        return False
    try:
        with open(path, "rb") as fh:
            return bool(_PYTHON_SHEBANG.match(fh.readline(200)))
    except OSError:
        return False


class SourceError(Exception):
    """The file cannot be read or decoded (reported as CG902, never raised to the user)."""


@dataclass
class Source:
    path: str
    text: str
    # Notebooks: (cell number, first line of the cell in ``text``) for each code cell, in order.
    cells: list[tuple[int, int]] | None = None
    # Notebooks: for each line of ``text`` (index 0 is line 1), the line of the .ipynb file (its JSON)
    # that holds it, where an annotation on that line belongs; None when the JSON could not be mapped.
    file_lines: list[int] | None = None

    def cell_of(self, line: int) -> tuple[int | None, int]:
        """Map a line of ``text`` to (cell, line within the cell); (None, line) for plain files."""
        if not self.cells:
            return None, line
        cell, start = self.cells[0]
        for number, first in self.cells:
            if first > line:
                break
            cell, start = number, first
        return cell, line - start + 1

    def file_line(self, line: int) -> int:
        """The line of the file on disk that holds line ``line`` of ``text`` (a notebook's JSON line)."""
        if not self.cells:
            return line
        if not self.file_lines:
            return 1
        return self.file_lines[min(max(line, 1), len(self.file_lines)) - 1]


def read_source(path: str) -> Source:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise SourceError(f"cannot read file: {exc.strerror or exc}") from None
    if path.endswith(".ipynb"):
        return _read_notebook(path, data)
    return Source(path, decode(data))


def decode(data: bytes) -> str:
    """Decode Python source the way the interpreter does (BOM, coding cookie, else UTF-8)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        raise SourceError(f"cannot decode: {exc.msg if hasattr(exc, 'msg') else exc}") from None
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise SourceError(f"cannot decode as {encoding}: {exc}") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


def _read_notebook(path: str, data: bytes) -> Source:
    try:
        nb = json.loads(data.decode("utf-8"))
        cells = nb["cells"] if isinstance(nb, dict) else None
        if not isinstance(cells, list):
            raise ValueError("no cells list")
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise SourceError(f"not a readable notebook: {exc}") from None
    positions = _source_positions(data.decode("utf-8"))
    chunks: list[str] = []
    index: list[tuple[int, int]] = []
    file_lines: list[int] | None = []
    line = 1
    number = 0
    for raw_index, cell in enumerate(cells):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        number += 1
        src = cell.get("source", "")
        if isinstance(src, list):
            src = "".join(s for s in src if isinstance(s, str))
        if not isinstance(src, str):
            continue
        # IPython magics and shell escapes are not Python: keep the line count, blank the line.
        body = [("" if _MAGIC.match(ln) else ln) for ln in src.split("\n")]
        index.append((number, line))
        chunks.append("\n".join(body))
        line += len(body)
        if file_lines is not None:
            mapped = _cell_file_lines(positions.get(raw_index) if positions is not None else None, len(body))
            file_lines = None if mapped is None else file_lines + mapped
    return Source(path, "\n".join(chunks) + "\n", cells=index, file_lines=file_lines)


# -- where a notebook's source lines are in its JSON ---------------------------------------------
# A notebook is JSON; GitHub annotations and SARIF locations name a line of that file. Each cell's
# ``source`` is a list of strings (one per line, as Jupyter writes it) or one string; a string
# sits on one line of the JSON, so every source line maps to the line of the string that holds it.

_JSON_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null|NaN|-?Infinity")
_JSON_SPACE = re.compile(r"[ \t\n\r]*")


@dataclass
class _CellSource:
    key_line: int  # the JSON line of the cell's "source" key
    strings: list[tuple[int, str]]  # (JSON line, text) of each string of its source


def _source_positions(text: str) -> dict[int, _CellSource] | None:
    """{index in ``cells``: where its source strings are}, or None when the text cannot be scanned
    (the notebook is still checked; its file-line annotations then go to line 1)."""
    newlines = [i for i, ch in enumerate(text) if ch == "\n"]
    found: dict[int, _CellSource] = {}
    path: list[str | int] = []  # where the scanner is: keys of objects, indexes of arrays
    containers: list[str] = []  # "{" or "[" for each open one
    expect_key = False
    pos = 0
    try:
        while True:
            pos = _JSON_SPACE.match(text, pos).end()
            if pos >= len(text):
                break
            ch = text[pos]
            if ch == '"':
                value, end = json.decoder.scanstring(text, pos + 1)
                line = bisect.bisect_left(newlines, pos) + 1
                in_cell = len(path) >= 2 and path[0] == "cells" and isinstance(path[1], int)
                if expect_key:
                    if in_cell and len(path) == 2 and value == "source":
                        found[path[1]] = _CellSource(line, [])
                    path.append(value)
                    expect_key = False
                elif in_cell and path[1] in found and path[2:3] == ["source"] and len(path) <= 4:
                    found[path[1]].strings.append((line, value))
                pos = end
            elif ch in "{[":
                containers.append(ch)
                if ch == "[":
                    path.append(0)
                expect_key = ch == "{"
                pos += 1
            elif ch in "}]":
                if containers.pop() == "[" or not expect_key:  # an object's last key, an array's index
                    path.pop()
                expect_key = False
                pos += 1
            elif ch == ",":
                if containers[-1] == "[":
                    path[-1] += 1
                else:
                    path.pop()
                    expect_key = True
                pos += 1
            elif ch == ":":
                pos += 1
            else:
                match = _JSON_SCALAR.match(text, pos)
                if match is None:
                    return None
                pos = match.end()
    except (ValueError, IndexError, TypeError, AttributeError):
        return None
    return found


def _cell_file_lines(where: _CellSource | None, count: int) -> list[int] | None:
    """The JSON line of each of a cell's ``count`` source lines."""
    if where is None:
        return None
    if not where.strings:
        return [where.key_line] * count
    starts = []  # offset in the cell's source where each string starts
    offset = 0
    for _line, value in where.strings:
        starts.append(offset)
        offset += len(value)
    source = "".join(value for _line, value in where.strings)
    line_starts = [0, *(i + 1 for i, ch in enumerate(source) if ch == "\n")]
    if len(line_starts) != count:
        return None
    return [where.strings[bisect.bisect_right(starts, start) - 1][0] for start in line_starts]


def iter_python_files(paths: list[str]):
    """Yield (path, explicitly named) for files under ``paths`` (directories are searched recursively)."""
    skip_dirs = {".git", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache", ".ruff_cache", "node_modules", ".ipynb_checkpoints"}
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if d not in skip_dirs and not d.startswith("."))
                for name in sorted(files):
                    if name.endswith((".py", NOTEBOOK_SUFFIX)):
                        yield os.path.join(root, name), False
        else:
            yield p, True
