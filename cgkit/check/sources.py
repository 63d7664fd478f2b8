"""Reading what the user points at: Python files (any declared encoding) and notebooks."""

from __future__ import annotations

import io
import json
import os
import re
import tokenize
from dataclasses import dataclass

_MAGIC = re.compile(r"^\s*[%!?]")


class SourceError(Exception):
    """The file cannot be read or decoded (reported as CG902, never raised to the user)."""


@dataclass
class Source:
    path: str
    text: str
    # Notebooks: (cell number, first line of the cell in ``text``) for each code cell, in order.
    cells: list[tuple[int, int]] | None = None

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
    chunks: list[str] = []
    index: list[tuple[int, int]] = []
    line = 1
    number = 0
    for cell in cells:
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
    return Source(path, "\n".join(chunks) + "\n", cells=index)


def iter_python_files(paths: list[str]):
    """Yield (path, explicitly named) for files under ``paths`` (directories are searched recursively)."""
    skip_dirs = {".git", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache", ".ruff_cache", "node_modules", ".ipynb_checkpoints"}
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if d not in skip_dirs and not d.startswith("."))
                for name in sorted(files):
                    if name.endswith((".py", ".ipynb")):
                        yield os.path.join(root, name), False
        else:
            yield p, True
